#!lua
-- demote: make a whitelisted memory ordinary again. It keeps its importance
-- and last access; its score becomes importance x recency and decay ticks
-- apply from now on. It may now be evictable, so the hot tier is then
-- brought back to max_hot as remember does. A memory that is not
-- whitelisted is left alone.
--
-- KEYS[1] policy: hash, the namespace's Policy
-- KEYS[2] state: hash, epoch, decay and jitter counter
-- KEYS[3] meta: hash, id -> packed metadata
-- KEYS[4] text: hash, id -> text
-- KEYS[5] hot: zset, evictable hot memories by decay key
-- KEYS[6] fresh: zset, protected non-whitelisted hot memories by decay key
-- KEYS[7] prot: zset, possibly protected hot memories by protected-until ms
-- KEYS[8] wl: zset, whitelisted memories by whitelist key
-- KEYS[9] cold: zset, cold memories by last use ms
-- KEYS[10] calls: hash, call id -> packed reply of a recent call (receipts)
-- KEYS[11] calls_at: zset, call ids by the server ms their receipt expires
--
-- ARGV[1] id: string, 1..1024 bytes
-- ARGV[2] now: whole ms since the Unix epoch, or '' for the server clock
-- ARGV[3] call: string, 0..64 bytes, unique per call: a repeat within retry_window_s
--   returns the first reply and writes nothing ('' for no receipt)
--
-- Returns: [score, [evicted id, ...], [demoted id], over] as remember, with
--   demoted empty when the memory was not whitelisted (nothing changed then).
-- Errors: ARITY, BAD_KEYS, WRONG_TYPE, BAD_ID, BAD_NOW, BAD_ARG, NO_POLICY, NOT_FOUND
--@include lib/args.lua
--@include lib/policy.lua
--@include lib/memory.lua
--@include lib/receipts.lua

check_call()
local id = arg_id(ARG.id)
local now = arg_now(ARG.now)
local call = arg_call(ARG.call)
local p, st = load_policy()

return once(call, p, function()
  local m = read_meta(id)
  if not m then fail('NOT_FOUND', 'no memory ' .. id) end
  if not m.wl then
    local over = math.max(0, hot_size() - p.max_hot)
    return {fmt(reported(m, ln_score(m, now, p, st), p)), {}, {}, over}
  end
  expire_protection(now)
  m.wl = false
  write_meta(m)
  unplace(m)
  place(m, now, p, st)
  return settle(m, now, p, st, {id})
end)
