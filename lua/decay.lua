#!lua
-- decay: apply one multiplicative decay tick to every non-whitelisted hot
-- memory, on top of time decay. O(1) whatever the store size: it adds
-- ln(rate) to the namespace's running decay sum D, which every decay key is
-- read against (see lib/memory.lua), so no key is rewritten. Whitelisted
-- memories are untouched; a memory touched, remembered or recalled after the
-- tick does not carry it. A tick is not idempotent (two ticks square the
-- rate), so a retried call must carry the same call id to apply once.
--
-- KEYS[1] policy: hash, the namespace's Policy
-- KEYS[2] state: hash, epoch, decay and jitter counter
-- KEYS[3] calls: hash, call id -> packed reply of a recent call (receipts)
-- KEYS[4] calls_at: zset, call ids by the server ms their receipt expires
--
-- ARGV[1] rate: decimal number in (0, 1], the factor applied to scores
-- ARGV[2] call: string, 0..64 bytes, unique per call: a repeat within retry_window_s
--   returns the first reply and writes nothing ('' for no receipt)
--
-- Returns: the namespace's running decay sum D after the tick (string, %.17g).
-- Errors: ARITY, BAD_KEYS, WRONG_TYPE, BAD_RATE, BAD_ARG, NO_POLICY
--@include lib/args.lua
--@include lib/policy.lua
--@include lib/receipts.lua

check_call()
local rate = arg_rate(ARG.rate)
local call = arg_call(ARG.call)
local p, st = load_policy()

return once(call, p, function()
  local decay = st.decay + math.log(rate)
  rcall('HSET', KEY.state, 'decay', fmt(decay))
  return fmt(decay)
end)
