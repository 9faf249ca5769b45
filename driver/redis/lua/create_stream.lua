-- create_stream: ARGV[4] stream, [5] partition count, [6] stream number.
local m = stream_meta()
if m ~= nil then
  fail('already_exists', 'stream ' .. ARGV[4] .. ' already exists')
end
check_args()
redis.call('HSET', META, 'n', ARGV[5], 'c', ARGV[3], 'sid', ARGV[6])
return 1
