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
-- KEYS[2] state: hash, epoch, decay, seq, g0, x0 and latest (see configure.lua)
-- KEYS[3] receipt: string, <prefix>call:<call id>, the id unique per call (0..64 bytes):
--   a repeat within retry_window_s returns the first reply and writes nothing
--   (an empty id keeps no receipt)
--
-- ARGV[1] rate: decimal number in (0, 1], the factor applied to scores
--
-- Returns: the namespace's running decay sum D after the tick (string, %.17g).
-- Errors: ARITY, BAD_KEYS, WRONG_TYPE, BAD_RATE, BAD_ARG, NO_POLICY, REPLY_NOT_KEPT
--@include lib/args.lua
--@include lib/policy.lua
--@include lib/receipts.lua

check_layout()
local rate = arg_rate(ARG.rate)
local p, st = load_policy()

return once(p, function()
  local decay = st.decay + math.log(rate)
  rcall('HSET', KEY.state, 'decay', fmt(decay))
  return fmt(decay)
end)
