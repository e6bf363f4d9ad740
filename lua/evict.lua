#!lua
-- evict: bring the namespace back to its policy, as far as one call's
-- bounded work allows: protection that ran out is processed, whitelisted
-- memories above whitelist_cap are demoted, the lowest-scored evictable
-- memories above max_hot (plus evict_batch) move to the cold tier, and the
-- cold tier drops its least recently evicted memories beyond cold_max for
-- good. Whitelisted and protected memories are never evicted. Call it until
-- backlog is 0 to drain work that earlier calls left (docs/rules.md: Bounded work per call).
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
-- KEYS[17] receipt: string, <prefix>call:<call id>, the id unique per call (0..64 bytes):
--   a repeat within retry_window_s returns the first reply and writes nothing
--   (an empty id keeps no receipt)
--
-- ARGV[1] now: whole ms since the Unix epoch, or '' for the server clock
-- ARGV[2] seen: '' or '<incarnation>:<revision>', the namespace as the caller last saw
--   it (the fields incarnation and revision of its policy): NAMESPACE_CHANGED, before any
--   write, if it was made again since or its policy changed ('' checks nothing)
--
-- Returns: [[evicted id, ...], [demoted id, ...], over, backlog, over_tokens]
--   where over and over_tokens (integers) are how far the hot tier is still
--   above max_hot and max_tokens and backlog (integer) counts the work still
--   waiting (as stats).
-- Errors: ARITY, BAD_KEYS, WRONG_TYPE, BAD_NOW, BAD_ARG, NO_POLICY, REPLY_NOT_KEPT
--   NAMESPACE_CHANGED
--@include lib/args.lua
--@include lib/policy.lua
--@include lib/memory.lua
--@include lib/receipts.lua

check_layout()
local now = arg_now(ARG.now)
local p, st = load_policy(ARG.seen)
now = namespace_now(now, st)

return once(p, st, function()
  check_types(KEY.meta) -- read only after the first write (enforce)
  local t = read_tiers(now, p, st)
  start_writes(t, p, st)
  local demoted = cap_whitelist(p, st, t)
  local evicted = enforce(p, st, t)
  local n = pressure(p, st, now)
  return {evicted, demoted, n.over, n.backlog, n.over_tokens}
end)
