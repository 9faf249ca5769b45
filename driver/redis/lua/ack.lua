-- ack: ARGV[4..] lease ids, each settled on its own. Returns per id 1,
-- or the word of why it was not held. The records' deletions are
-- gathered (later), and the frontier of each partition is kept here
-- while the acks come in order, written once at the end.
local now = ARGV[3]
local fronts = {}

-- done marks an acked sequence terminal: in order, on the kept frontier;
-- otherwise through terminal, after writing the kept one.
local function done(G, p, seq)
  local id = G .. p
  local c = fronts[id]
  if c == nil then
    c = {G = G, p = p, f = tonumber(stored_frontier(G, p)), marks = redis.call('ZCARD', G .. 't:' .. p)}
    fronts[id] = c
  end
  if c.marks == 0 and seq == c.f + 1 then
    c.f, c.dirty = seq, true
    return
  end
  if c.dirty then
    redis.call('HSET', G .. 'fr', p, fmt(c.f))
  end
  terminal(G, p, seq)
  fronts[id] = nil
end

-- The receipts' entries are read per partition in one XRANGE over the
-- batch's sequences when they are dense, as a fetch's usually are, and
-- one by one otherwise.
local span = {}
local index = {}
for i = 4, #ARGV do
  local p, seq, v = lease_position(ARGV[i])
  index[i] = v
  if p then
    local s = span[p]
    if s == nil then
      span[p] = {lo = seq, hi = seq, n = 1}
    else
      s.lo, s.hi, s.n = math.min(s.lo, seq), math.max(s.hi, seq), s.n + 1
    end
  end
end
local there = {}
for p, s in pairs(span) do
  if s.n > 1 and s.hi - s.lo < 4 * s.n then
    local seen = {}
    for _, e in ipairs(redis.call('XRANGE', part_key(p), entry_id(s.lo), entry_id(s.hi))) do
      seen[tonumber(string.match(e[1], '^(%d+)'))] = true
    end
    there[p] = seen
  end
end
local function present(p, seq)
  if there[p] then
    return there[p][seq] == true
  end
  return entry(p, seq) ~= nil
end

-- A lease in the index is held (lib.lua, LEASE): an ack needs no more
-- than its index entry and its entry's presence, the receipt.
local out = {}
for i = 4, #ARGV do
  local lid, v = ARGV[i], index[i]
  if not v then
    out[#out + 1] = 'stale_lease'
  else
    local r = unpack_record(v, LEASE)
    local G, p, seq = group_prefix(r.g), tonumber(r.p), tonumber(r.q)
    if not present(p, seq) then
      out[#out + 1] = 'receipt_mismatch'
    else
      later('HDEL', G .. 'd', dkey(p, seq))
      later('ZREM', G .. 'due:' .. p, fmt(seq))
      later('ZREM', G .. 'ip:' .. p, fmt(seq))
      later('HDEL', P .. 'leases', lid)
      done(G, p, seq)
      if r.k ~= '' then
        redis.call('ZREM', G .. 'kq:' .. p .. ':' .. r.k, fmt(seq))
        unblock(G, p, r.k, now)
      end
      out[#out + 1] = 1
    end
  end
end
flush()
for _, c in pairs(fronts) do
  if c.dirty then
    redis.call('HSET', c.G .. 'fr', c.p, fmt(c.f))
  end
end
return out
