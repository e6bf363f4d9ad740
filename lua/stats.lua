#!lua flags=no-writes
-- stats: how many memories the namespace holds in each state, and how much
-- work the bounded calls have left for later. Read-only.
--
-- KEYS[1] policy: hash, the namespace's Policy
-- KEYS[2] state: hash, epoch, decay, seq, g0, x0, latest, wbase and tokens (see configure.lua)
-- KEYS[3] hot: zset, evictable hot memories in no group, by decay key
-- KEYS[4] fresh: zset, protected non-whitelisted hot memories by decay key
-- KEYS[5] prot: zset, possibly protected hot memories by protected-until ms or order
-- KEYS[6] wl: zset, whitelisted memories by whitelist key
-- KEYS[7] cold: zset, cold memories by last use ms
-- KEYS[8] ghot: zset, evictable hot memories in a group, by decay key
-- KEYS[9] groups: zset, evictable groups by their highest member's decay key
--
-- ARGV[1] now: whole ms since the Unix epoch, or '' for the server clock
--
-- Returns: [hot, cold, whitelisted, protected, over, backlog, tokens,
--   over_tokens], integers; hot counts every hot memory (whitelisted and
--   protected included); cold counts at most cold_max (the rest are gone for
--   every reader); protected counts hot memories that are protected (by time
--   or by activity: lib/memory.lua); over is how far the hot tier is above
--   max_hot; backlog counts the work waiting for later calls (0: the policy holds as if it always had);
--   tokens is the hot tier's total tokens and over_tokens how far it is above
--   max_tokens.
-- Errors: ARITY, BAD_KEYS, WRONG_TYPE, BAD_NOW, NO_POLICY
--@include lib/args.lua
--@include lib/policy.lua
--@include lib/memory.lua

check_call()
local now = arg_now(ARG.now)
local p, st = load_policy()
now = namespace_now(now, st)

local n = pressure(p, st, now)
return {n.size, math.min(n.cold, p.cold_max), n.wl,
  protected_count(now, newest_after(p, st, 0)), n.over, n.backlog, n.tokens, n.over_tokens}
