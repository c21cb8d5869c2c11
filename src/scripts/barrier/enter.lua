-- Enter a double barrier (dlock's own, src/sync/barrier.c): the member
-- joins the round being gathered, and the N-th to join opens it.
--
-- KEYS[1]  the state, dlock_barrier:{name}: a hash (parties, round, open)
-- KEYS[2]  the members, dlock_barrier:{name}:members: member id -> the
--          server time (ms) its lease ends
-- KEYS[3]  the channel, dlock_barrier__channel:{name}
-- ARGV[1]  the member id
-- ARGV[2]  its lease in ms (the watchdog timeout: renewed by barrier/renew.lua)
-- ARGV[3]  the parties, N (1..100000, checked by the caller)
-- ARGV[4]  the round this member joined (its first answer), or 0 for none yet
--
-- Members whose lease ran out are dropped first. No round: one starts, its
-- id the server's time in microseconds (rounds never share one). A round
-- being gathered takes the member (again, should its lease have run out:
-- nobody has passed) with its lease, and opens when N have joined ("1"
-- published). An open round takes nobody: a newcomer waits for it to end.
-- Answers:
--   {1, round}                 entered: the round is open with this member
--   {0, round, count, ttl}     joined round (0: none, the open round is not
--                              over), count members now; sleep until a
--                              message or ttl ms (-1: a message)
--   {-1}                       dropped: the round it joined went on (opened,
--                              ended) without it, its lease having run out
--   {-2, parties}              the round in progress has another N (nothing
--                              written)
--@include now.lua
--@include barrier_state.lua
--@include barrier_keep.lua
local me, lease, n, joined = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
sweep()
if parties and parties ~= n then
  return {-2, parties}
end
if not parties then
  if joined ~= '0' then
    return {-1}
  end
  round = t[1] .. string.format('%06d', tonumber(t[2]))
  parties = n
  redis.call('hset', state, 'parties', n, 'round', round, 'open', '0')
elseif joined ~= '0' and joined ~= round then
  return {-1}
end
if open then
  if redis.call('zscore', members, me) then
    return {1, tonumber(round)}   -- a retry of the answer that opened it, or a later look
  end
  if joined ~= '0' then
    return {-1}
  end
  return {0, 0, redis.call('zcard', members), earliest()}
end
redis.call('zadd', members, now + lease, me)
keep(state, members, lease)
local count = redis.call('zcard', members)
if count >= parties then
  redis.call('hset', state, 'open', '1')
  redis.call('publish', channel, '1')
  return {1, tonumber(round)}
end
return {0, tonumber(round), count, -1}
