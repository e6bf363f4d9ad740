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
-- KEYS[2] state: hash, epoch, decay, seq, g0, x0, latest, wbase and tokens (see configure.lua)
-- KEYS[3] meta: hash, id -> packed metadata
-- KEYS[4] text: hash, id -> text
-- KEYS[5] hot: zset, evictable hot memories in no group, by decay key
-- KEYS[6] fresh: zset, protected non-whitelisted hot memories by decay key
-- KEYS[7] prot: zset, possibly protected hot memories by protected-until ms or order
-- KEYS[8] wl: zset, whitelisted memories by whitelist key
-- KEYS[9] cold: zset, cold memories by last use ms
-- KEYS[10] ghot: zset, evictable hot memories in a group, by decay key
-- KEYS[11] groups: zset, evictable groups by their highest member's decay key
-- KEYS[12] links: zset, group .. NUL .. id of every memory in a group (lex order)
-- KEYS[13] terms: hash, the lexical index: term -> its postings (see lib/index.lua)
-- KEYS[14] entries: hash, entry -> id of every memory indexed now
-- KEYS[15] entry_of: hash, id -> its entry in the index
-- KEYS[16] log: stream, the eviction log: what left a tier, when and why (lib/memory.lua)
--   (decay reads none of the four: a write keeps every key of the namespace alive
--   for idle_ttl_s, so the index and the log do not expire before its memories)
-- KEYS[17] receipt: string, <prefix>call:<call id>, the id unique per call (0..64 bytes):
--   a repeat within retry_window_s returns the first reply and writes nothing
--   (an empty id keeps no receipt)
--
-- ARGV[1] rate: decimal number in (0, 1], the factor applied to scores
-- ARGV[2] seen: '' or '<incarnation>:<revision>', the namespace as the caller last saw
--   it (the fields incarnation and revision of its policy): NAMESPACE_CHANGED, before any
--   write, if it was made again since or its policy changed ('' checks nothing)
--
-- Returns: the namespace's running decay sum D after the tick (string, %.17g).
-- Errors: ARITY, BAD_KEYS, WRONG_TYPE, BAD_RATE, BAD_ARG, NO_POLICY, REPLY_NOT_KEPT
--   NAMESPACE_CHANGED
--@include lib/args.lua
--@include lib/policy.lua
--@include lib/receipts.lua

check_layout()
local rate = arg_rate(ARG.rate)
local p, st = load_policy(ARG.seen)

return once(p, st, function()
  check_types(KEY.meta, KEY.text, KEY.hot, KEY.fresh, KEY.prot, KEY.wl, KEY.cold, KEY.ghot,
    KEY.groups, KEY.links, KEY.terms, KEY.entries, KEY.entry_of, KEY.log) -- (only kept alive here)
  st.decay, st.changed = st.decay + math.log(rate), true
  save_state(st)
  return fmt(st.decay)
end)
