-- reset_group: ARGV[4] stream, [5] group, [6] start after ("" none),
-- [7] start after + 1, [8] start at ("" none), [9] partitions.
local sm = need_stream(ARGV[4])
need_group(ARGV[4], ARGV[5])
check_args()
local scope = scope_arg(ARGV[9], sm.n)
check_scope(scope, sm.n)
local G = group_prefix(ARGV[5])
for _, p in ipairs(scope) do
  clear_partition(G, p)
  place_cursor(G, p, ARGV[6], ARGV[7], ARGV[8])
end
return 1
