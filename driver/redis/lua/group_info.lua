-- group_info: ARGV[4] stream, [5] group. Returns {per partition
-- {frontier, hwm}, inflight, pending, dead letters, oldest unsettled ts
-- or ""}. The oldest unsettled ts reads the events past each frontier:
-- its cost grows with the lag.
local sm = need_stream(ARGV[4])
need_group(ARGV[4], ARGV[5])
local G = group_prefix(ARGV[5])
local now = ARGV[3]
local lags = {}
local oldest = ''
for p = 0, sm.n - 1 do
  local f = frontier(G, p)
  local h = hwm(p)
  lags[#lags + 1] = {f, fmt(h)}
  local fs = tonumber(stored_frontier(G, p))
  local nf = tonumber(f)
  if nf < h then
    local start = '(' .. f .. '-0'
    while true do
      local r = redis.call('XRANGE', part_key(p), start, '+', 'COUNT', 1000)
      if #r == 0 then
        break
      end
      for _, e in ipairs(r) do
        local seq = tonumber(string.match(e[1], '^(%d+)'))
        local open
        if seq <= fs then
          open = redis.call('ZSCORE', G .. 'ip:' .. p, fmt(seq)) ~= false
        else
          open = redis.call('ZSCORE', G .. 't:' .. p, fmt(seq)) == false
        end
        if open then
          local fl = e[2]
          for i = 1, #fl, 2 do
            if fl[i] == 't' and (oldest == '' or fl[i + 1] < oldest) then
              oldest = fl[i + 1]
            end
          end
        end
      end
      start = '(' .. r[#r][1]
    end
  end
end
local inflight, pending = 0, 0
local all = redis.call('HVALS', G .. 'd')
for _, v in ipairs(all) do
  local d = unpack_record(v, DELIVERY)
  if d.s == 'leased' and d.x > now then
    inflight = inflight + 1
  elseif d.s ~= 'blocked' then
    pending = pending + 1
  end
end
return {lags, inflight, pending, redis.call('HLEN', G .. 'dl'), oldest}
