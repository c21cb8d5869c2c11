-- The failover quarantine recorded on the server (dlock's own;
-- docs/wire-format.md): a string key dlock_quarantine:{<tag>} whose tag puts
-- it in the lock's cluster slot (on one primary: dlock_quarantine:{*}),
-- written by a client with the quarantine on when it sees a new primary
-- (quarantine/record.lua), living as long as that quarantine. While it lives
-- an acquisition that would take something new is refused, before it takes
-- anything, whatever the caller's own setting: the new primary may lack a
-- grant its predecessor made and lost. `qkey` nil: not given (the caller's
-- client does not use dlock's own keys: an ACL refuses them).
local function quarantine_refusal(qkey)
  if not qkey then
    return nil
  end
  local left = redis.pcall('pttl', qkey)
  if type(left) == 'number' and left > 0 then
    return redis.error_reply('DLOCKQUARANTINE ' .. left ..
                             ' ms left of the failover quarantine of this new primary')
  end
  return nil
end
