-- lag: ARGV[4] stream, [5] group, [6] partitions ("*" every one).
-- Returns per partition {partition, frontier, high watermark}.
local sm = need_stream(ARGV[4])
need_group(ARGV[4], ARGV[5])
check_args()
local scope = scope_arg(ARGV[6], sm.n)
check_scope(scope, sm.n)
local G = group_prefix(ARGV[5])
local out = {}
for _, p in ipairs(scope) do
  out[#out + 1] = {p, frontier(G, p), fmt(hwm(p))}
end
return out
