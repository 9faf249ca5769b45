-- ack: ARGV[4..] lease ids, each settled on its own. Returns per id 1,
-- or the word of why it was not held. The records' deletions are
-- gathered (gather, flush), and the frontier of each partition is kept here
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

-- The lease index entries of the batch are read in one HMGET. A
-- receipt's entry is there when its partition has no hole: the stream
-- holds every sequence from the low watermark to the high one exactly
-- when its length says so (prune trims below the low watermark; only a
-- deletion behind Rheo's back, XDEL or XTRIM, makes a hole), and then no
-- entry is read.
-- A partition with a hole has its entries read one by one.
local lids = {}
for i = 4, #ARGV do
  lids[#lids + 1] = ARGV[i]
end
local index = {}
for c = 1, #lids, 4000 do
  local vs = redis.call('HMGET', P .. 'leases', unpack(lids, c, math.min(c + 3999, #lids)))
  for j = 1, #vs do
    index[c + j - 1] = vs[j]
  end
end
local dense = {}
local function present(p, seq)
  local lo = dense[p]
  if lo == nil then
    lo = false
    local l, h = low(p), hwm(p)
    if redis.call('XLEN', part_key(p)) == h - l + 1 then
      lo = l
    end
    dense[p] = lo
  end
  if lo then
    return seq >= lo
  end
  return entry(p, seq) ~= nil
end

-- The deletions are gathered per group and partition: the records, the
-- due and in-progress indexes, and the lease ids.
local acked = gather('HDEL', P .. 'leases')
local groups = {}
local function targets(g, sp)
  local t = groups[g]
  if t == nil then
    local G = group_prefix(g)
    t = {G = G, records = gather('HDEL', G .. 'd'), parts = {}}
    groups[g] = t
  end
  local x = t.parts[sp]
  if x == nil then
    x = {G = t.G, records = t.records, due = gather('ZREM', t.G .. 'due:' .. sp), ip = gather('ZREM', t.G .. 'ip:' .. sp)}
    t.parts[sp] = x
  end
  return x
end

-- A lease in the index is held (lib.lua, LEASE): an ack needs no more
-- than its index entry and its entry's presence, the receipt. The
-- entry's fields are matched at once: group, partition, sequence,
-- attempt, key.
local lease_pattern = record_pattern(LEASE)
local out = {}
for i, lid in ipairs(lids) do
  local v = index[i]
  if not v then
    out[#out + 1] = 'stale_lease'
  else
    local rg, rp, rq, _, rk = string.match(v, lease_pattern)
    local p, seq = tonumber(rp), tonumber(rq)
    if not present(p, seq) then
      out[#out + 1] = 'receipt_mismatch'
    else
      local t = targets(rg, rp)
      local G = t.G
      t.records[#t.records + 1] = rp .. ':' .. rq
      t.due[#t.due + 1] = rq
      t.ip[#t.ip + 1] = rq
      acked[#acked + 1] = lid
      done(G, p, seq)
      if rk ~= '' then
        redis.call('ZREM', G .. 'kq:' .. p .. ':' .. rk, rq)
        unblock(G, p, rk, now)
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
