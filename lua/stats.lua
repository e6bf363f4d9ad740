#!lua flags=no-writes
-- stats: how many memories the namespace holds in each state. Read-only.
--
-- KEYS[1] hot: zset, evictable hot memories by decay key
-- KEYS[2] fresh: zset, protected non-whitelisted hot memories by decay key
-- KEYS[3] prot: zset, possibly protected hot memories by protected-until ms
-- KEYS[4] wl: zset, whitelisted memories by whitelist key
-- KEYS[5] cold: zset, cold memories by last use ms
--
-- ARGV[1] now: whole ms since the Unix epoch, or '' for the server clock
--
-- Returns: [hot, cold, whitelisted, protected], integers; hot counts every
--   hot memory (whitelisted and protected included); protected counts hot
--   memories whose protection runs past now.
-- Errors: ARITY, BAD_KEYS, WRONG_TYPE, BAD_NOW
--@include lib/args.lua

check_call()
local now = arg_now(ARG.now)

local hot = rcall('ZCARD', KEY.hot) + rcall('ZCARD', KEY.fresh) + rcall('ZCARD', KEY.wl)
return {hot, rcall('ZCARD', KEY.cold), rcall('ZCARD', KEY.wl),
  rcall('ZCOUNT', KEY.prot, '(' .. fmt(now), '+inf')}
