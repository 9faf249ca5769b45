-- create_group: ARGV[4] stream, [5] group, [6] max attempts, [7]
-- ordering, [8] start after ("" none), [9] start after + 1, [10] start at
-- ("" none), [11] partitions of the start option ("*" every one), [12]
-- the ordering's error ("" none), checked after the partitions.
local sm = need_stream(ARGV[4])
local g = ARGV[5]
if group_meta(g) ~= nil then
  fail('already_exists', 'group ' .. g .. ' already exists on stream ' .. ARGV[4])
end
check_args()
local scope = scope_arg(ARGV[11], sm.n)
check_scope(scope, sm.n)
raise(ARGV[12])
local listed = {}
for _, p in ipairs(scope) do
  listed[p] = true
end
local G = group_prefix(g)
redis.call('HSET', G .. 'meta', 'ma', ARGV[6], 'o', ARGV[7], 'c', ARGV[3], 'rot', '0')
redis.call('ZADD', P .. 'groups', 0, g)
for p = 0, sm.n - 1 do
  if listed[p] then
    place_cursor(G, p, ARGV[8], ARGV[9], ARGV[10])
  else
    place_cursor(G, p, '', '', '')
  end
end
return 1
