-- dlock's own optional keys (docs/wire-format.md): given after a script's
-- other keys, in any order, each class left out when the caller's client
-- does not use it (an ACL refuses it; the reservation, with the priority
-- off). Known by their prefixes: own_keys(first) maps each prefix found
-- among KEYS[first..] ('dlock_lock_delay:', 'dlock_read_delay:',
-- 'dlock_permit_delay:', 'dlock_lock_next:', 'dlock_quarantine:') to its key.
local function own_keys(first)
  local own = {}
  for i = first, #KEYS do
    local p = string.match(KEYS[i], '^dlock_[a-z_]+:')
    if p then
      own[p] = KEYS[i]
    end
  end
  return own
end
