#!lua
-- evict: if the hot tier holds more than max_hot memories, move the
-- lowest-scored evictable ones (plus evict_batch) to the cold tier, which
-- then drops its least recently evicted memories beyond cold_max for good.
-- Whitelisted and protected memories are never evicted.
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
-- ARGV[1] now: whole ms since the Unix epoch, or '' for the server clock
-- ARGV[2] call: string, 0..64 bytes, unique per call: a repeat within retry_window_s
--   returns the first reply and writes nothing ('' for no receipt)
--
-- Returns: [[evicted id, ...], over] where over (integer) is how far the hot
--   tier is still above max_hot.
-- Errors: ARITY, BAD_KEYS, WRONG_TYPE, BAD_NOW, BAD_ARG, NO_POLICY
--@include lib/args.lua
--@include lib/policy.lua
--@include lib/memory.lua
--@include lib/receipts.lua

check_call()
local now = arg_now(ARG.now)
local call = arg_call(ARG.call)
local p = load_policy()

return once(call, p, function()
  expire_protection(now)
  local evicted, over = enforce(now, p)
  return {evicted, over}
end)
