-- read: ARGV[4] stream, [5] after, [6] max count, [7] partition.
local sm = need_stream(ARGV[4])
check_args()
local p = tonumber(ARGV[7])
check_scope({p}, sm.n)
local count = tonumber(ARGV[6])
if count == 0 then
  return {}
end
return redis.call('XRANGE', part_key(p), '(' .. ARGV[5] .. '-0', '+', 'COUNT', count)
