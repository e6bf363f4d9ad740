#!lua
-- demote: make a whitelisted memory ordinary again. It keeps its importance
-- and last access; its score becomes importance x recency and decay ticks
-- apply from now on. A memory that is not whitelisted is left alone.
--
-- KEYS[1] policy: hash, the namespace's Policy
-- KEYS[2] state: hash, epoch, decay and jitter counter
-- KEYS[3] meta: hash, id -> packed metadata
-- KEYS[4] hot: zset, evictable hot memories by decay key
-- KEYS[5] fresh: zset, protected non-whitelisted hot memories by decay key
-- KEYS[6] prot: zset, possibly protected hot memories by protected-until ms
-- KEYS[7] wl: zset, whitelisted memories by whitelist key
--
-- ARGV[1] id: string, 1..1024 bytes
-- ARGV[2] now: whole ms since the Unix epoch, or '' for the server clock
--
-- Returns: 1 if the memory was whitelisted and is now ordinary, 0 if it was not whitelisted.
-- Errors: ARITY, WRONG_TYPE, BAD_ID, BAD_NOW, NO_POLICY, NOT_FOUND
--@include lib/args.lua
--@include lib/policy.lua
--@include lib/memory.lua

check_call()
local id = arg_id(ARG.id)
local now = arg_now(ARG.now)
local p, st = load_policy()
local m = read_meta(id)
if not m then fail('NOT_FOUND', 'no memory ' .. id) end
if not m.wl then return 0 end

m.wl = false
write_meta(m)
unplace(m)
place(m, now, p, st)
return 1
