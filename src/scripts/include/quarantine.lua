-- The failover quarantine recorded on the server (dlock's own;
-- docs/wire-format.md): a string key dlock_quarantine:{<tag>} whose tag puts
-- it in the lock's cluster slot (on one primary: dlock_quarantine:{*}),
-- "<replid>:<ms>:<until>": armed by clients with the quarantine on
-- (quarantine/record.lua) with the replication id of the primary it was
-- written on and the quarantine's length in ms; `until` is the server time
-- (ms) the running quarantine ends (0: none yet). Replicas keep the value
-- they received: on a replica promoted since (or a primary restarted), the
-- server's replication id is another, and the first acquisition that looks
-- starts the quarantine there, for everybody: it lasts ms from then. While
-- it runs, an acquisition that would take something new is refused before
-- it takes anything, whatever the caller's own setting: the new primary
-- may lack a grant its predecessor made and lost. `qkey` nil: not given
-- (the caller's client does not use dlock's own keys: an ACL refuses them).
local function quarantine_refusal(qkey)
  if not qkey then
    return nil
  end
  local v = redis.pcall('get', qkey)
  if type(v) ~= 'string' then
    return nil
  end
  local rid, ms, till = string.match(v, '^(%x+):(%d+):(%d+)$')
  if not rid then
    return nil
  end
  local t = redis.call('time')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local left = tonumber(till) - now
  if left <= 0 then
    local cur = string.match(redis.call('info', 'replication'), 'master_replid:(%x+)')
    if not cur or cur == rid then
      return nil
    end
    -- A new primary (or a restart): its quarantine starts now.
    left = tonumber(ms)
    redis.call('set', qkey, cur .. ':' .. ms .. ':' .. (now + left), 'px',
               math.max(redis.call('pttl', qkey), left))
  end
  return redis.error_reply('DLOCKQUARANTINE ' .. left ..
                           ' ms left of the failover quarantine of this new primary')
end
