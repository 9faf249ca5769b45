-- list_groups: ARGV[4] stream. Returns per group, by name, {name, max
-- attempts, created at, ordering}.
need_stream(ARGV[4])
local out = {}
for _, g in ipairs(group_names()) do
  local m = group_meta(g)
  out[#out + 1] = {g, m.ma, m.c, m.o}
end
return out
