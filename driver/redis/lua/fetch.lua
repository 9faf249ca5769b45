-- fetch: ARGV[4] stream, [5] group, [6] max count, [7] consumer, [8]
-- expires at, [9] partitions ("*" every one), [10] a random seed (32
-- hex digits) of the lease ids. Returns per lease {lease id, partition,
-- sequence, attempt}, ordered by (partition, sequence): the driver reads
-- the events themselves, which never change, after the script, so that
-- their payloads do not pass through Lua.
local sm = need_stream(ARGV[4])
local g = ARGV[5]
local gm = need_group(ARGV[4], g)
check_args()
local scope = scope_arg(ARGV[9], sm.n)
check_scope(scope, sm.n)
local maxc = tonumber(ARGV[6])
local now = ARGV[3]
local G = group_prefix(g)
local ord = gm.o
local sid = string.format('%08x', tonumber(sm.sid))
local out = {}

-- Expired leases at the attempt limit are dead letters, in every
-- partition of the fetch, before anything is claimed: their keys may
-- unblock events this fetch then claims.
for _, p in ipairs(scope) do
  local due = redis.call('ZRANGEBYSCORE', G .. 'due:' .. p, '-inf', tonumber(now))
  for _, s in ipairs(due) do
    local seq = tonumber(s)
    local d = get_delivery(G, p, seq)
    if d and d.s == 'leased' and d.x <= now and tonumber(d.a) >= gm.ma then
      settle_done(G, p, seq, d, now, 'lease_expired')
    end
  end
end
if maxc == 0 or #scope == 0 then
  return out
end

local work = {}
for _, p in ipairs(scope) do
  local list = {}
  if ord ~= 'partition' then
    local due = redis.call('ZRANGEBYSCORE', G .. 'due:' .. p, '-inf', tonumber(now), 'LIMIT', 0, 1000)
    for _, s in ipairs(due) do
      list[#list + 1] = tonumber(s)
    end
    table.sort(list)
  end
  work[#work + 1] = {p = p, sp = fmt(p), due = list, di = 1, hwm = hwm(p), taken = 0,
    due_args = gather('ZADD', G .. 'due:' .. p), ip_args = gather('ZADD', G .. 'ip:' .. p), rows = {}}
end

-- FRESH is the delivery of an event not offered before, outside key
-- ordering; claim reads it and does not change it.
local FRESH = {s = 'pending', a = '0', l = '', c = '', la = '', x = now, r = '', k = ''}

-- next_new passes the cursor over the next event. Under key ordering it
-- reads the partition ahead in one XRANGE for the events' keys, and
-- parks (blocks) an event behind an unsettled one of its key while the
-- cursor goes on; the other orderings need no more than the sequence.
-- Only key ordering keeps the deliveries' keys (set_ordering adds them
-- when a group turns to it).
local function next_new(w)
  while true do
    if w.cur == nil then
      w.cur = tonumber(redis.call('HGET', G .. 'cur', w.p))
      w.buf, w.bi = {}, 1
    end
    if w.cur > w.hwm then
      return nil
    end
    if ord ~= 'key' then
      local seq = w.cur
      w.cur = seq + 1
      w.moved = true
      return seq, FRESH
    end
    if w.bi > #w.buf then
      local n = math.min(math.ceil(maxc / #work) + 1, 1000)
      w.buf = redis.call('XRANGE', part_key(w.p), entry_id(w.cur), entry_id(w.hwm), 'COUNT', n)
      w.bi = 1
      if #w.buf == 0 then
        return nil
      end
    end
    local raw = w.buf[w.bi]
    w.bi = w.bi + 1
    local seq = tonumber(string.match(raw[1], '^(%d+)'))
    w.cur = seq + 1
    w.moved = true
    local k = ''
    local fl = raw[2]
    for i = 1, #fl, 2 do
      if fl[i] == 'k' then
        k = fl[i + 1]
      end
    end
    local d = {s = 'pending', a = '0', l = '', c = '', la = '', x = now, r = '', k = k}
    if k ~= '' and #redis.call('ZRANGE', G .. 'kq:' .. w.p .. ':' .. k, 0, 0) > 0 then
      d.s = 'blocked'
      put_delivery(G, w.p, seq, d)
    else
      return seq, d
    end
  end
end

local function candidate(w)
  if ord == 'partition' then
    if w.taken > 0 then
      return nil
    end
    local lowest = redis.call('ZRANGE', G .. 'ip:' .. w.p, 0, 0)
    if #lowest > 0 then
      local seq = tonumber(lowest[1])
      local d = get_delivery(G, w.p, seq)
      if d.s == 'blocked' or d.x <= now then
        return seq, d
      end
      return nil
    end
    return next_new(w)
  end
  while w.di <= #w.due do
    local seq = w.due[w.di]
    w.di = w.di + 1
    local d = get_delivery(G, w.p, seq)
    if d and d.s ~= 'blocked' and d.x <= now then
      if ord == 'key' and d.k ~= '' and
        tonumber(redis.call('ZRANGE', G .. 'kq:' .. w.p .. ':' .. d.k, 0, 0)[1]) < seq then
        set_blocked(G, w.p, seq, d)
      else
        return seq, d
      end
    end
  end
  return next_new(w)
end

-- lease_id is the i-th lease id of this fetch: a version 8 UUID of the
-- stream's number, 64 random bits of the driver's seed (ARGV[10]) and
-- the counter i.
local seed = ARGV[10]
local variant = tonumber(string.sub(seed, 17, 17), 16) % 4 + 1
local lease_prefix = sid .. '-' .. string.sub(seed, 1, 4) .. '-8' .. string.sub(seed, 5, 7) .. '-' ..
  string.sub('89ab', variant, variant) .. string.sub(seed, 8, 10) .. '-' .. string.sub(seed, 11, 16)
local function lease_id(i)
  return lease_prefix .. string.format('%06x', i)
end

-- The claims' writes, gathered: no claim of this fetch reads the record
-- or the indexes of another claim (the key queue, which the next claims
-- of a key read, is written at once).
local records = gather('HSET', G .. 'd')
local lease_index = gather('HSET', P .. 'leases')
local released = gather('HDEL', P .. 'leases')
local consumer, expires = ARGV[7], ARGV[8]
local claimed = 0

local function claim(w, seq, d)
  claimed = claimed + 1
  local lid = lease_id(claimed)
  if d.l ~= '' then
    released[#released + 1] = d.l
  end
  local a = fmt(tonumber(d.a) + 1)
  local sseq = fmt(seq)
  -- The record as put_delivery stores it (lib.lua, DELIVERY), and its
  -- lease's index entry (LEASE), joined at once.
  records[#records + 1] = w.sp .. ':' .. sseq
  records[#records + 1] = 'leased' .. SEP .. a .. SEP .. lid .. SEP .. consumer .. SEP .. now .. SEP .. expires ..
    SEP .. d.r .. SEP .. d.k
  local due, ip = w.due_args, w.ip_args
  due[#due + 1] = expires
  due[#due + 1] = sseq
  ip[#ip + 1] = sseq
  ip[#ip + 1] = sseq
  if d.k ~= '' then
    redis.call('ZADD', G .. 'kq:' .. w.sp .. ':' .. d.k, seq, sseq)
  end
  lease_index[#lease_index + 1] = lid
  lease_index[#lease_index + 1] = g .. SEP .. w.sp .. SEP .. sseq .. SEP .. a .. SEP .. d.k
  w.taken = w.taken + 1
  w.rows[#w.rows + 1] = {lid, w.p, seq, tonumber(a)}
end

-- Round-robin from a rotating partition: one claim per partition with
-- work per round, until max count.
local start = tonumber(redis.call('HINCRBY', G .. 'meta', 'rot', 1)) % #work
local order = {}
for i = 0, #work - 1 do
  order[#order + 1] = work[((start + i) % #work) + 1]
end
while claimed < maxc do
  local any = false
  for _, w in ipairs(order) do
    if claimed >= maxc then
      break
    end
    if not w.done then
      local seq, d = candidate(w)
      if seq then
        claim(w, seq, d)
        any = true
      else
        w.done = true
      end
    end
  end
  if not any then
    break
  end
end
flush()
for _, w in ipairs(work) do
  if w.moved then
    redis.call('HSET', G .. 'cur', w.p, fmt(w.cur))
  end
end
-- Each partition's claims are in sequence order (the due ones, below
-- the cursor, before the new ones): the partitions in order, each one's
-- claims after the other, are the leases by (partition, sequence).
table.sort(work, function(a, b)
  return a.p < b.p
end)
for _, w in ipairs(work) do
  for _, row in ipairs(w.rows) do
    out[#out + 1] = row
  end
end
return out
