-- leases: ARGV[4] stream, [5] group, [6] max count. Returns per delivery
-- in progress (leased or pending, not blocked), soonest due first:
-- {event id, partition, sequence, state, consumer, attempt, leased at,
-- due at, reason}.
local sm = need_stream(ARGV[4])
need_group(ARGV[4], ARGV[5])
check_args()
local maxc = tonumber(ARGV[6])
local G = group_prefix(ARGV[5])
local rows = {}
for p = 0, sm.n - 1 do
  local seqs = redis.call('ZRANGE', G .. 'due:' .. p, 0, maxc - 1)
  for _, s in ipairs(seqs) do
    local seq = tonumber(s)
    local d = get_delivery(G, p, seq)
    rows[#rows + 1] = {p = p, seq = seq, d = d}
  end
end
table.sort(rows, function(a, b)
  if a.d.x ~= b.d.x then
    return a.d.x < b.d.x
  end
  if a.p ~= b.p then
    return a.p < b.p
  end
  return a.seq < b.seq
end)
local out = {}
for i = 1, math.min(maxc, #rows) do
  local r = rows[i]
  local e = entry(r.p, r.seq)
  local state = 'pending'
  if r.d.s == 'leased' then
    state = 'leased'
  end
  out[#out + 1] = {e and e.i or '', r.p, r.seq, state, r.d.c, tonumber(r.d.a), r.d.la, r.d.x, r.d.r}
end
return out
