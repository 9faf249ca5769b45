-- drop_group: ARGV[4] stream, [5] group.
local sm = need_stream(ARGV[4])
need_group(ARGV[4], ARGV[5])
drop_group_state(ARGV[5], sm.n)
return 1
