-- retry: ARGV[4] lease id, [5] reason ("" none), [6] when the event is
-- due again. Returns "retrying" or "dead_lettered".
check_args()
local h = need_held(ARGV[4])
local gm = group_meta(h.g)
local d = h.d
if tonumber(d.a) >= gm.ma then
  local reason = ARGV[5]
  if reason == '' then
    reason = 'max_attempts'
  end
  settle_done(h.G, h.p, h.seq, d, ARGV[3], reason)
  return 'dead_lettered'
end
redis.call('HDEL', P .. 'leases', d.l)
d.s, d.l, d.c, d.x, d.r = 'pending', '', '', ARGV[6], ARGV[5]
put_delivery(h.G, h.p, h.seq, d)
return 'retrying'
