-- replay: ARGV[4] stream, [5] group, [6] selector ("seq", "ts" or
-- "ids"), [7] partitions, then the sequence, the time, or the event ids
-- ([8..]). Returns how many events became claimable again.
local sm = need_stream(ARGV[4])
local gm = need_group(ARGV[4], ARGV[5])
check_args()
local scope = scope_arg(ARGV[7], sm.n)
check_scope(scope, sm.n)
local G = group_prefix(ARGV[5])
local now = ARGV[3]
local count = 0

-- rewind makes every event of p after n claimable again from attempt 1.
local function rewind(p, n)
  local lw = low(p)
  if n < lw - 1 then
    n = lw - 1
  end
  local cur = tonumber(redis.call('HGET', G .. 'cur', p))
  if n + 1 >= cur then
    return
  end
  -- The events the cursor passed, less those it only parked behind
  -- their key (never offered); none past the high watermark exists.
  count = count + (math.min(cur - 1, hwm(p)) - n)
  local later = redis.call('ZRANGEBYSCORE', G .. 'ip:' .. p, '(' .. fmt(n), '+inf')
  for _, s in ipairs(later) do
    local d = get_delivery(G, p, tonumber(s))
    if d then
      if d.s == 'blocked' and d.a == '0' then
        count = count - 1
      end
      forget(G, p, tonumber(s), d)
    end
  end
  redis.call('ZREMRANGEBYSCORE', G .. 't:' .. p, '(' .. fmt(n), '+inf')
  local dls = redis.call('ZRANGEBYLEX', G .. 'dlx', '[' .. dl_member(p, n + 1), '(' .. string.format('%04d;', p))
  for _, m in ipairs(dls) do
    redis.call('HDEL', G .. 'dl', dkey(p, tonumber(string.sub(m, 6))))
    redis.call('ZREM', G .. 'dlx', m)
  end
  redis.call('HSET', G .. 'cur', p, fmt(n + 1))
  if tonumber(stored_frontier(G, p)) > n then
    redis.call('HSET', G .. 'fr', p, fmt(n))
  end
end

local mode = ARGV[6]
if mode == 'seq' then
  for _, p in ipairs(scope) do
    rewind(p, tonumber(ARGV[8]))
  end
elseif mode == 'ts' then
  for _, p in ipairs(scope) do
    local s = first_at(p, ARGV[8])
    if s ~= nil then
      rewind(p, s - 1)
    end
  end
else
  local listed = {}
  for _, p in ipairs(scope) do
    listed[p] = true
  end
  for i = 8, #ARGV do
    local stored = redis.call('HGET', P .. 'ids', ARGV[i])
    if stored then
      local sp, sq = string.match(stored, '^(%d+):(%d+)$')
      local p, seq = tonumber(sp), tonumber(sq)
      local cur = tonumber(redis.call('HGET', G .. 'cur', p))
      local t = G .. 't:' .. p
      local done = redis.call('ZSCORE', t, fmt(seq)) or seq <= tonumber(stored_frontier(G, p))
      if listed[p] and seq < cur and done and get_delivery(G, p, seq) == nil then
        local k = ''
        if gm.o == 'key' then
          k = event_key(entry(p, seq))
        end
        redis.call('ZREM', t, fmt(seq))
        redis.call('HDEL', G .. 'dl', dkey(p, seq))
        redis.call('ZREM', G .. 'dlx', dl_member(p, seq))
        put_delivery(G, p, seq, {s = 'pending', a = '0', l = '', c = '', la = '', x = now, r = '', k = k})
        count = count + 1
      end
    end
  end
end
return count
