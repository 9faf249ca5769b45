-- append: ARGV[4] stream, [5] explicit partition ("" none), [6] the
-- argument error found after the partition's check ("" none), [7] the
-- number of events, then 9 fields per event: id, key, the key's routing
-- hash ("" without a key), payload, metadata, ts, content fingerprint,
-- type ("" none), "1" for an id the driver generated.
-- Returns per event {partition, sequence, repeat, ts, payload, metadata,
-- key, type}: repeat is 1 for an id already stored with the same content (the
-- stored fields follow), 2 for an earlier event of the same batch.
local sm = need_stream(ARGV[4])
check_args()
local explicit = nil
if ARGV[5] ~= '' then
  explicit = tonumber(ARGV[5])
  check_scope({explicit}, sm.n)
end
raise(ARGV[6])
local count = tonumber(ARGV[7])
local out = {}
local seen = {}
local next_seq = {}
local plan = {}
for i = 1, count do
  local b = 7 + (i - 1) * 9
  local id, key, h, fp = ARGV[b + 1], ARGV[b + 2], ARGV[b + 3], ARGV[b + 7]
  local p = 0
  if explicit ~= nil then
    p = explicit
  elseif h ~= '' then
    p = tonumber(h) % sm.n
  end
  if seen[id] then
    if seen[id].fp ~= fp then
      fail('already_exists', 'event id ' .. id .. ' appears twice in the batch with different content')
    end
    plan[i] = {rep = seen[id]}
  else
    -- An id the driver generated cannot be stored yet.
    local stored = ARGV[b + 9] ~= '1' and redis.call('HGET', P .. 'ids', id)
    if stored then
      local sp, sq = string.match(stored, '^(%d+):(%d+)$')
      local e = entry(tonumber(sp), tonumber(sq))
      if e == nil or e.f ~= fp then
        fail('already_exists', 'event id ' .. id .. ' is stored with other content')
      end
      plan[i] = {old = {tonumber(sp), tonumber(sq), 1, e.t, e.p, e.m, e.k or '', e.y or ''}}
      seen[id] = {fp = fp, p = tonumber(sp), q = tonumber(sq)}
    else
      if next_seq[p] == nil then
        next_seq[p] = hwm(p)
      end
      next_seq[p] = next_seq[p] + 1
      local e = {fp = fp, p = p, q = next_seq[p]}
      seen[id] = e
      plan[i] = {new = e, b = b}
    end
  end
end
for i = 1, count do
  local x = plan[i]
  if x.new then
    local b = x.b
    local e = x.new
    local fields = {'i', ARGV[b + 1], 'p', ARGV[b + 4], 'm', ARGV[b + 5], 't', ARGV[b + 6], 'f', ARGV[b + 7]}
    if ARGV[b + 2] ~= '' then
      fields[#fields + 1] = 'k'
      fields[#fields + 1] = ARGV[b + 2]
    end
    if ARGV[b + 8] ~= '' then
      fields[#fields + 1] = 'y'
      fields[#fields + 1] = ARGV[b + 8]
    end
    redis.call('XADD', part_key(e.p), entry_id(e.q), unpack(fields))
    redis.call('HSET', P .. 'ids', ARGV[b + 1], dkey(e.p, e.q))
    out[i] = {e.p, e.q, 0}
  elseif x.old then
    out[i] = x.old
  else
    out[i] = {x.rep.p, x.rep.q, 2}
  end
end
for p, q in pairs(next_seq) do
  redis.call('HSET', P .. 'hwm', p, fmt(q))
  redis.call('PUBLISH', P .. 'wake', fmt(p) .. ' ' .. fmt(q))
end
return out
