-- drop_stream: ARGV[4] stream. Returns how many events it deleted.
local sm = need_stream(ARGV[4])
local count = 0
for _, g in ipairs(group_names()) do
  drop_group_state(g, sm.n)
end
for p = 0, sm.n - 1 do
  count = count + redis.call('XLEN', part_key(p))
  redis.call('DEL', part_key(p))
end
redis.call('DEL', META, P .. 'hwm', P .. 'low', P .. 'ids', P .. 'groups', P .. 'leases')
return count
