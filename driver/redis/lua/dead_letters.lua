-- dead_letters: ARGV[4] stream, [5] group, [6] max count, [7] the event
-- id to page after ("" the first page). Returns per dead letter
-- {partition, sequence, attempt, reason, dead-lettered at, the entry's
-- fields}, in (partition, sequence) order.
local sm = need_stream(ARGV[4])
need_group(ARGV[4], ARGV[5])
check_args()
local G = group_prefix(ARGV[5])
local from = '-'
if ARGV[7] ~= '' then
  local stored = redis.call('HGET', P .. 'ids', ARGV[7])
  local p, seq
  if stored then
    p, seq = string.match(stored, '^(%d+):(%d+)$')
  end
  if not stored or redis.call('HEXISTS', G .. 'dl', dkey(tonumber(p), tonumber(seq))) == 0 then
    fail('cursor_not_found', 'event ' .. ARGV[7] .. ' is not among the dead letters of group ' .. ARGV[5])
  end
  from = '(' .. dl_member(tonumber(p), tonumber(seq))
end
local maxc = tonumber(ARGV[6])
local out = {}
if maxc == 0 then
  return out
end
local members = redis.call('ZRANGEBYLEX', G .. 'dlx', from, '+', 'LIMIT', 0, maxc)
for _, m in ipairs(members) do
  local p, seq = tonumber(string.sub(m, 1, 4)), tonumber(string.sub(m, 6))
  local dl = unpack_record(redis.call('HGET', G .. 'dl', dkey(p, seq)), DEAD)
  local _, fields = entry(p, seq)
  out[#out + 1] = {p, seq, tonumber(dl.a), dl.r, dl.at, fields or {}}
end
return out
