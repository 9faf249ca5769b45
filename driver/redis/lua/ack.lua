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

local out = {}
for i = 4, #ARGV do
  local h, word = held(ARGV[i])
  if h then
    local G, p, seq, d = h.G, h.p, h.seq, h.d
    later('HDEL', G .. 'd', dkey(p, seq))
    later('ZREM', G .. 'due:' .. p, fmt(seq))
    later('ZREM', G .. 'ip:' .. p, fmt(seq))
    later('HDEL', P .. 'leases', d.l)
    done(G, p, seq)
    if d.k ~= '' then
      redis.call('ZREM', G .. 'kq:' .. p .. ':' .. d.k, fmt(seq))
      unblock(G, p, d.k, now)
    end
    out[#out + 1] = 1
  else
    out[#out + 1] = word
  end
end
flush()
for _, c in pairs(fronts) do
  if c.dirty then
    redis.call('HSET', c.G .. 'fr', c.p, fmt(c.f))
  end
end
return out
