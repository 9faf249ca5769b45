-- renew: ARGV[4] lease id, [5] the new expiry.
check_args()
local h = need_held(ARGV[4])
h.d.x = ARGV[5]
put_delivery(h.G, h.p, h.seq, h.d)
return 1
