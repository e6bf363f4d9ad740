#!lua
-- decay: apply one multiplicative decay tick to every non-whitelisted hot
-- memory, on top of time decay. O(1) whatever the store size: it adds
-- ln(rate) to the namespace's running decay sum D, which every decay key is
-- read against (see lib/memory.lua), so no key is rewritten. Whitelisted
-- memories are untouched; a memory touched, remembered or recalled after the
-- tick does not carry it.
--
-- KEYS[1] policy: hash, the namespace's Policy
-- KEYS[2] state: hash, epoch, decay and jitter counter
--
-- ARGV[1] rate: decimal number in (0, 1], the factor applied to scores
--
-- Returns: the namespace's running decay sum D after the tick (string, %.17g).
-- Errors: ARITY, WRONG_TYPE, BAD_RATE, NO_POLICY
--@include lib/args.lua
--@include lib/policy.lua

check_call()
local rate = arg_rate(ARG.rate)
local _, st = load_policy()

local decay = st.decay + math.log(rate)
rcall('HSET', KEY.state, 'decay', fmt(decay))
return fmt(decay)
