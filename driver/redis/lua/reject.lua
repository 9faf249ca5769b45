-- reject: ARGV[4] lease id, [5] reason ("" none).
check_args()
local h = need_held(ARGV[4])
local reason = ARGV[5]
if reason == '' then
  reason = 'rejected'
end
settle_done(h.G, h.p, h.seq, h.d, ARGV[3], reason)
return 1
