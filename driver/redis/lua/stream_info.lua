-- stream_info: ARGV[4] stream. Returns {max age or "", per partition
-- {low watermark, high watermark}}.
local sm = need_stream(ARGV[4])
local parts = {}
for p = 0, sm.n - 1 do
  parts[#parts + 1] = {fmt(low(p)), fmt(hwm(p))}
end
return {sm.age or '', parts}
