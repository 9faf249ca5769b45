-- set_retention: ARGV[4] stream, [5] max age in microseconds ("" none).
need_stream(ARGV[4])
check_args()
if ARGV[5] == '' then
  redis.call('HDEL', META, 'age')
else
  redis.call('HSET', META, 'age', ARGV[5])
end
return 1
