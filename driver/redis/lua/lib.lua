-- lib.lua is put before every script of the driver: the key layout and the
-- steps that several operations share. Every script is called with KEYS[1]
-- the stream's meta key and ARGV[1] the prefix of the stream's keys
-- ("rheo:{<stream>}:"); every other key it touches is built from that
-- prefix, so that all of them hash to the stream's slot on a cluster.
--
-- Numbers: Lua's numbers are doubles. Sequences and attempts stay far
-- below 2^53 and are computed with; times travel as fixed-width decimal
-- strings (microseconds since 0001-01-01, 18 digits) and are only
-- compared, as strings, never computed with; the Go side does the
-- arithmetic. Sequences that may exceed 2^53 (start_after, a cursor at
-- the end of int64) are stored as the strings Go sent.
--
-- Redis does not roll a script back when it fails half-way: every
-- script checks all of its arguments and state before its first write.

local P = ARGV[1]
local META = KEYS[1]

-- fmt renders an integral number without an exponent.
local function fmt(n)
  return string.format('%d', n)
end

-- fail ends the script with one of Rheo's words; the driver maps
-- "RHEO <word> <detail>" to the sentinel.
local function fail(word, detail)
  return error({err = 'RHEO ' .. word .. ' ' .. detail})
end

-- raise fails with an argument error the driver found, "word detail"
-- ("" none).
local function raise(words)
  if words ~= '' then
    error({err = 'RHEO ' .. words})
  end
end

-- check_args raises the argument error the driver found (ARGV[2], "word
-- detail"), after the existence checks that come before it.
local function check_args()
  raise(ARGV[2])
end

local function stream_meta()
  local m = redis.call('HGETALL', META)
  if #m == 0 then
    return nil
  end
  local t = {}
  for i = 1, #m, 2 do
    t[m[i]] = m[i + 1]
  end
  return t
end

-- need_stream returns the stream's meta, or fails stream_not_found.
local function need_stream(name)
  local m = stream_meta()
  if m == nil then
    fail('stream_not_found', 'stream ' .. name .. ' does not exist')
  end
  m.n = tonumber(m.n)
  return m
end

local function part_key(p)
  return P .. 'e:' .. p
end

-- entry_id is the stream entry id of a sequence: <seq>-0.
local function entry_id(seq)
  return fmt(seq) .. '-0'
end

-- group_prefix is the prefix of a group's keys; the name's length keeps
-- a group name with colons from meeting another group's keys.
local function group_prefix(g)
  return P .. 'g:' .. #g .. ':' .. g .. ':'
end

local function group_meta(g)
  local m = redis.call('HGETALL', group_prefix(g) .. 'meta')
  if #m == 0 then
    return nil
  end
  local t = {}
  for i = 1, #m, 2 do
    t[m[i]] = m[i + 1]
  end
  t.ma = tonumber(t.ma)
  return t
end

local function need_group(stream, g)
  local m = group_meta(g)
  if m == nil then
    fail('group_not_found', 'group ' .. g .. ' does not exist on stream ' .. stream)
  end
  return m
end

-- check_scope fails invalid_partition for a partition outside the stream.
local function check_scope(scope, n)
  for _, p in ipairs(scope) do
    if p < 0 or p >= n then
      fail('invalid_partition', 'partition ' .. fmt(p) .. ' is outside 0..' .. fmt(n - 1))
    end
  end
end

-- scope_arg reads a partition list argument: "*" is every partition,
-- else comma-separated numbers ("" none).
local function scope_arg(s, n)
  local scope = {}
  if s == '*' then
    for p = 0, n - 1 do
      scope[#scope + 1] = p
    end
    return scope
  end
  for x in string.gmatch(s, '[^,]+') do
    scope[#scope + 1] = tonumber(x)
  end
  return scope
end

local function hwm(p)
  return tonumber(redis.call('HGET', P .. 'hwm', p) or '0')
end

local function low(p)
  return tonumber(redis.call('HGET', P .. 'low', p) or '1')
end

-- entry returns the fields of the event at seq as a table, and as the
-- flat list the driver decodes; nil when it is not retained.
local function entry(p, seq)
  local r = redis.call('XRANGE', part_key(p), entry_id(seq), entry_id(seq))
  if #r == 0 then
    return nil
  end
  local f = r[1][2]
  local t = {}
  for i = 1, #f, 2 do
    t[f[i]] = f[i + 1]
  end
  return t, f
end

local function dkey(p, seq)
  return fmt(p) .. ':' .. fmt(seq)
end

-- Records are their fields joined by NUL, in a fixed order: no text of
-- Rheo's can hold a NUL (the driver refuses it), and joining is far
-- cheaper than cjson in the hot paths.
local SEP = '\0'
local DELIVERY = {'s', 'a', 'l', 'c', 'la', 'x', 'r', 'k'}
-- The lease index holds exactly the leases held: an id leaves it when
-- its delivery is re-leased, settled, parked or forgotten.
local LEASE = {'g', 'p', 'q', 'a', 'k'}
local DEAD = {'a', 'r', 'at'}

local function pack(t, names)
  local parts = {}
  for i, n in ipairs(names) do
    parts[i] = t[n]
  end
  return table.concat(parts, SEP)
end

-- A record of n fields is read with one match: n - 1 runs of non-NUL
-- characters each followed by a NUL, then the rest. The patterns are
-- built once per field list.
local patterns = {}

local function record_pattern(names)
  local pat = patterns[names]
  if pat == nil then
    pat = '^' .. string.rep('([^%z]*)%z', #names - 1) .. '(.*)$'
    patterns[names] = pat
  end
  return pat
end

local function unpack_record(v, names)
  local vals = {string.match(v, record_pattern(names))}
  local t = {}
  for i, n in ipairs(names) do
    t[n] = vals[i]
  end
  return t
end

-- A delivery record: an event the group has offered and not settled.
-- s: state (leased, pending, blocked); a: attempt; l: lease id or "";
-- c: consumer or ""; la: leased at or ""; x: expires at or due at; r:
-- reason of the latest retry; k: the event's key or "".
local function get_delivery(G, p, seq)
  local v = redis.call('HGET', G .. 'd', dkey(p, seq))
  if not v then
    return nil
  end
  return unpack_record(v, DELIVERY)
end

-- put_delivery stores a record and keeps the partition's indexes: due
-- (leased and pending ones, by due time), ip (every one, by sequence)
-- and the key's queue.
local function put_delivery(G, p, seq, d)
  redis.call('HSET', G .. 'd', dkey(p, seq), pack(d, DELIVERY))
  if d.s == 'blocked' then
    redis.call('ZREM', G .. 'due:' .. p, fmt(seq))
  else
    redis.call('ZADD', G .. 'due:' .. p, d.x, fmt(seq))
  end
  redis.call('ZADD', G .. 'ip:' .. p, seq, fmt(seq))
  if d.k ~= '' then
    redis.call('ZADD', G .. 'kq:' .. p .. ':' .. d.k, seq, fmt(seq))
  end
end

-- The hot paths (fetch's claims, ack) gather their writes and send them
-- with flush, one command per key and verb, instead of one per event.
-- gather returns the argument list of a command on a key, to which the
-- caller adds members to remove, or fields and their values, or scores
-- and their members. Only writes that nothing in the script reads back
-- are gathered.
local gathered, gathered_at = {}, {}

local function gather(cmd, key)
  local id = cmd .. ' ' .. key
  local g = gathered_at[id]
  if g == nil then
    g = {cmd = cmd, key = key, args = {}}
    gathered_at[id] = g
    gathered[#gathered + 1] = g
  end
  return g.args
end

-- A hash or sorted set that Redis creates small is a listpack, in which
-- every write is a scan, until it passes 128 entries (the default
-- hash-max-listpack-entries, zset-max-listpack-entries): hundreds of
-- writes into a new key pay that scan on the first 128 of them. A first
-- entry longer than 64 bytes (the default *-max-listpack-value) makes
-- Redis create the key as a hash table or a skip list at once, so a
-- gathered write of more entries than that into a key that does not
-- exist starts with such a placeholder and removes it when done. No
-- other script sees it: scripts are atomic.
local PLACEHOLDER = string.rep('~', 65)
local LISTPACK_ENTRIES = 128
local placeholders = {
  HSET = {'HSET', 'HDEL', '~', PLACEHOLDER},
  ZADD = {'ZADD', 'ZREM', 0, PLACEHOLDER},
}

local function flush()
  for _, g in ipairs(gathered) do
    local args = g.args
    local ph = placeholders[g.cmd]
    if ph and #args > 2 * LISTPACK_ENTRIES and redis.call('EXISTS', g.key) == 0 then
      redis.call(ph[1], g.key, ph[3], ph[4])
    else
      ph = nil
    end
    -- unpack takes a bounded number of values: send in chunks of pairs.
    for i = 1, #args, 4000 do
      redis.call(g.cmd, g.key, unpack(args, i, math.min(i + 3999, #args)))
    end
    if ph then
      if ph[1] == 'HSET' then
        redis.call(ph[2], g.key, ph[3])
      else
        redis.call(ph[2], g.key, ph[4])
      end
    end
  end
  gathered, gathered_at = {}, {}
end

-- stored_frontier is the frontier as kept: every sequence up to it is
-- terminal or in progress (ip). The frontier proper is below the lowest
-- in-progress delivery.
local function stored_frontier(G, p)
  return redis.call('HGET', G .. 'fr', p) or '0'
end

local function frontier(G, p)
  local f = stored_frontier(G, p)
  local lowest = redis.call('ZRANGE', G .. 'ip:' .. p, 0, 0)
  if #lowest > 0 and tonumber(lowest[1]) - 1 < tonumber(f) then
    return fmt(tonumber(lowest[1]) - 1)
  end
  return f
end

-- unblock makes the first waiting delivery of a key claimable once the
-- delivery ahead of it is gone.
local function unblock(G, p, k, now)
  if k == '' then
    return
  end
  local first = redis.call('ZRANGE', G .. 'kq:' .. p .. ':' .. k, 0, 0)
  if #first == 0 then
    return
  end
  local seq = tonumber(first[1])
  local d = get_delivery(G, p, seq)
  if d and d.s == 'blocked' then
    d.s = 'pending'
    d.x = now
    put_delivery(G, p, seq, d)
  end
end

-- forget removes a delivery record and its indexes, and its lease id.
local function forget(G, p, seq, d)
  redis.call('HDEL', G .. 'd', dkey(p, seq))
  redis.call('ZREM', G .. 'due:' .. p, fmt(seq))
  redis.call('ZREM', G .. 'ip:' .. p, fmt(seq))
  if d.k ~= '' then
    redis.call('ZREM', G .. 'kq:' .. p .. ':' .. d.k, fmt(seq))
  end
  if d.l ~= '' then
    redis.call('HDEL', P .. 'leases', d.l)
  end
end

-- advance moves the stored frontier over the terminal run after it.
local function advance(G, p)
  local f = tonumber(stored_frontier(G, p))
  local t = G .. 't:' .. p
  local nf = f
  while redis.call('ZSCORE', t, fmt(nf + 1)) do
    nf = nf + 1
  end
  if nf > f then
    redis.call('ZREMRANGEBYSCORE', t, '-inf', nf)
    redis.call('HSET', G .. 'fr', p, fmt(nf))
  end
end

-- terminal marks seq terminal for the group and moves the frontier over
-- the terminal run after it.
local function terminal(G, p, seq)
  local f = tonumber(stored_frontier(G, p))
  if seq <= f then
    return
  end
  local t = G .. 't:' .. p
  if seq == f + 1 then
    -- In order: the frontier moves at once, over what was settled after.
    local nf = seq
    while redis.call('ZSCORE', t, fmt(nf + 1)) do
      nf = nf + 1
    end
    if nf > seq then
      redis.call('ZREMRANGEBYSCORE', t, '-inf', nf)
    end
    redis.call('HSET', G .. 'fr', p, fmt(nf))
    return
  end
  redis.call('ZADD', t, seq, fmt(seq))
end

local function dl_member(p, seq)
  return string.format('%04d:%016d', p, seq)
end

-- settle_done ends a delivery as acked (reason nil) or dead-lettered.
local function settle_done(G, p, seq, d, now, reason)
  forget(G, p, seq, d)
  if reason then
    redis.call('HSET', G .. 'dl', dkey(p, seq), pack({a = d.a, r = reason, at = now}, DEAD))
    redis.call('ZADD', G .. 'dlx', 0, dl_member(p, seq))
  end
  terminal(G, p, seq)
  unblock(G, p, d.k, now)
end

-- event_key is an entry's key field, "" when it has none.
local function event_key(e)
  return e.k or ''
end

-- group_names lists the stream's groups.
local function group_names()
  return redis.call('ZRANGE', P .. 'groups', 0, -1)
end

-- clear_partition drops a group's state in partition p: its deliveries
-- (their lease ids go stale), terminal marks and dead letters.
local function clear_partition(G, p)
  local ip = redis.call('ZRANGE', G .. 'ip:' .. p, 0, -1)
  for _, s in ipairs(ip) do
    local d = get_delivery(G, p, tonumber(s))
    if d then
      forget(G, p, tonumber(s), d)
    end
  end
  redis.call('DEL', G .. 'due:' .. p, G .. 'ip:' .. p, G .. 't:' .. p)
  local lo = string.format('%04d:', p)
  local dls = redis.call('ZRANGEBYLEX', G .. 'dlx', '[' .. lo, '(' .. string.format('%04d;', p))
  for _, m in ipairs(dls) do
    local seq = tonumber(string.sub(m, 6))
    redis.call('HDEL', G .. 'dl', dkey(p, seq))
    redis.call('ZREM', G .. 'dlx', m)
  end
end

-- first_at returns the lowest sequence of partition p whose ts >= at, or
-- nil; it reads the partition from its oldest event (a scan, the cost of
-- start_at and from_ts).
local function first_at(p, at)
  local key = part_key(p)
  local start = '-'
  while true do
    local r = redis.call('XRANGE', key, start, '+', 'COUNT', 1000)
    if #r == 0 then
      return nil
    end
    for _, e in ipairs(r) do
      local f = e[2]
      for i = 1, #f, 2 do
        if f[i] == 't' and f[i + 1] >= at then
          return tonumber(string.match(e[1], '^(%d+)'))
        end
      end
    end
    start = '(' .. r[#r][1]
  end
end

-- place_cursor sets a group's cursor and frontier in p as create_group
-- and reset_group do: after (a sequence string, or ""; after1 is one more),
-- or at the first
-- event at or after at ("" none), else the beginning; never below the
-- low watermark.
local function place_cursor(G, p, after, after1, at)
  local lw = low(p)
  local cursor, f
  if after ~= '' then
    if tonumber(after) + 1 > lw then
      f = after
    end
  elseif at ~= '' then
    local s = first_at(p, at)
    if s == nil then
      s = hwm(p) + 1
    end
    if s > lw then
      f = fmt(s - 1)
    end
  end
  if f == nil then
    f = fmt(lw - 1)
  end
  redis.call('HSET', G .. 'fr', p, f)
  -- The cursor is one past the frontier; a frontier near the end of
  -- int64 keeps it as text (Go sent the sum).
  if after ~= '' and f == after then
    cursor = after1
  else
    cursor = fmt(tonumber(f) + 1)
  end
  redis.call('HSET', G .. 'cur', p, cursor)
end

-- held returns the delivery a lease id holds, or nil with the word and
-- the detail of why not. The lease index keeps the receipt of each lease
-- (the entry id and the delivery's attempt, Redis Streams' delivery
-- count): a held lease whose receipt no longer matches its delivery or
-- its entry is receipt_mismatch.
local function held(lid)
  local v = redis.call('HGET', P .. 'leases', lid)
  if not v then
    return nil, 'stale_lease', 'lease ' .. lid .. ' is no longer held'
  end
  local r = unpack_record(v, LEASE)
  local G = group_prefix(r.g)
  local p, seq = tonumber(r.p), tonumber(r.q)
  local d = get_delivery(G, p, seq)
  if d == nil or d.l ~= lid then
    return nil, 'stale_lease', 'lease ' .. lid .. ' is no longer held'
  end
  if d.a ~= r.a or entry(p, seq) == nil then
    return nil, 'receipt_mismatch', 'lease ' .. lid .. ' presents the receipt ' .. entry_id(seq) .. '/' .. r.a ..
      ', which no longer matches its delivery'
  end
  return {G = G, g = r.g, p = p, seq = seq, d = d}
end

-- need_held is held, failing with its word.
local function need_held(lid)
  local h, word, detail = held(lid)
  if h == nil then
    fail(word, detail)
  end
  return h
end

-- set_blocked parks a delivery behind an earlier one of its key; a
-- lease it had goes stale.
local function set_blocked(G, p, seq, d)
  if d.l ~= '' then
    redis.call('HDEL', P .. 'leases', d.l)
  end
  d.s, d.l, d.c = 'blocked', '', ''
  put_delivery(G, p, seq, d)
end

-- drop_group_state deletes every key of a group.
local function drop_group_state(g, n)
  local G = group_prefix(g)
  for p = 0, n - 1 do
    clear_partition(G, p)
  end
  redis.call('DEL', G .. 'meta', G .. 'cur', G .. 'fr', G .. 'd', G .. 'dl', G .. 'dlx')
  redis.call('ZREM', P .. 'groups', g)
end
