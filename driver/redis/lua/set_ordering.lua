-- set_ordering: ARGV[4] stream, [5] group, [6] ordering. Leaving key
-- ordering makes the events it parked claimable at once; turning to it
-- gives the deliveries in progress their keys, which only key ordering
-- keeps, so that later events of a key wait for them.
local sm = need_stream(ARGV[4])
local gm = need_group(ARGV[4], ARGV[5])
check_args()
local G = group_prefix(ARGV[5])
redis.call('HSET', G .. 'meta', 'o', ARGV[6])
if gm.o == 'key' and ARGV[6] ~= 'key' then
  for p = 0, sm.n - 1 do
    for _, s in ipairs(redis.call('ZRANGE', G .. 'ip:' .. p, 0, -1)) do
      local d = get_delivery(G, p, tonumber(s))
      if d.s == 'blocked' then
        d.s, d.x = 'pending', ARGV[3]
        put_delivery(G, p, tonumber(s), d)
      end
    end
  end
end
if gm.o ~= 'key' and ARGV[6] == 'key' then
  for p = 0, sm.n - 1 do
    for _, s in ipairs(redis.call('ZRANGE', G .. 'ip:' .. p, 0, -1)) do
      local seq = tonumber(s)
      local d = get_delivery(G, p, seq)
      local e = entry(p, seq)
      if e ~= nil and d.k == '' and event_key(e) ~= '' then
        d.k = event_key(e)
        put_delivery(G, p, seq, d)
        if d.l ~= '' then
          -- An ack finds the key in the lease index.
          redis.call('HSET', P .. 'leases', d.l, pack({g = ARGV[5], p = fmt(p), q = fmt(seq), a = d.a, k = d.k}, LEASE))
        end
      end
    end
  end
end
return 1
