-- prune: ARGV[4] stream, [5] max count, [6] "1" to force, [7] the
-- cutoff (events with ts before it are old enough), [8] the max age the
-- cutoff was computed from. Returns how many events it deleted, or -1
-- when the retention changed meanwhile (the driver computes again).
local sm = need_stream(ARGV[4])
check_args()
if (sm.age or '') ~= ARGV[8] then
  return -1
end
if ARGV[8] == '' then
  return 0
end
local remaining = tonumber(ARGV[5])
local force = ARGV[6] == '1'
local cutoff = ARGV[7]
local now = ARGV[3]
local groups = group_names()
local deleted = 0
for p = 0, sm.n - 1 do
  if remaining <= 0 then
    break
  end
  local bound = hwm(p)
  if not force then
    for _, g in ipairs(groups) do
      local f = tonumber(frontier(group_prefix(g), p))
      if f < bound then
        bound = f
      end
    end
  end
  local lw = low(p)
  local last = nil
  local ids = {}
  local start = entry_id(lw)
  local stop = false
  while not stop and remaining > 0 do
    local r = redis.call('XRANGE', part_key(p), start, '+', 'COUNT', math.min(remaining, 1000))
    if #r == 0 then
      break
    end
    for _, e in ipairs(r) do
      local seq = tonumber(string.match(e[1], '^(%d+)'))
      local fl = e[2]
      local t = {}
      for i = 1, #fl, 2 do
        t[fl[i]] = fl[i + 1]
      end
      if seq > bound or t.t >= cutoff then
        stop = true
        break
      end
      last = seq
      ids[#ids + 1] = t.i
      remaining = remaining - 1
    end
    start = '(' .. r[#r][1]
  end
  if last ~= nil then
    redis.call('XTRIM', part_key(p), 'MINID', entry_id(last + 1))
    for _, id in ipairs(ids) do
      redis.call('HDEL', P .. 'ids', id)
    end
    redis.call('HSET', P .. 'low', p, fmt(last + 1))
    deleted = deleted + #ids
    for _, g in ipairs(groups) do
      local G = group_prefix(g)
      local dls = redis.call('ZRANGEBYLEX', G .. 'dlx', '[' .. dl_member(p, lw), '[' .. dl_member(p, last))
      for _, m in ipairs(dls) do
        redis.call('HDEL', G .. 'dl', dkey(p, tonumber(string.sub(m, 6))))
        redis.call('ZREM', G .. 'dlx', m)
      end
      if force then
        local gone = redis.call('ZRANGEBYSCORE', G .. 'ip:' .. p, '-inf', last)
        local keys = {}
        for _, s in ipairs(gone) do
          local d = get_delivery(G, p, tonumber(s))
          if d then
            forget(G, p, tonumber(s), d)
            keys[#keys + 1] = d.k
          end
        end
        for _, k in ipairs(keys) do
          unblock(G, p, k, now)
        end
        redis.call('ZREMRANGEBYSCORE', G .. 't:' .. p, '-inf', last)
        if tonumber(redis.call('HGET', G .. 'cur', p)) <= last then
          redis.call('HSET', G .. 'cur', p, fmt(last + 1))
        end
        if tonumber(stored_frontier(G, p)) < last then
          redis.call('HSET', G .. 'fr', p, fmt(last))
          -- The terminal run after the new frontier joins it.
          advance(G, p)
        end
      end
    end
  end
end
return deleted
