-- ack: ARGV[4..] lease ids, each settled on its own. Returns per id 1,
-- or the word of why it was not held.
local out = {}
for i = 4, #ARGV do
  local h, word = held(ARGV[i])
  if h then
    settle_done(h.G, h.p, h.seq, h.d, ARGV[3], nil)
    out[#out + 1] = 1
  else
    out[#out + 1] = word
  end
end
return out
