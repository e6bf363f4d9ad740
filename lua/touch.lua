#!lua
-- touch: mark a hot memory as used now. Its age and accumulated decay ticks
-- start again (it is as fresh as a new memory); its protection window and
-- jitter are unchanged. A cold or unknown id is left alone.
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
-- Returns: 1 if the memory is hot and was touched, 0 if it is cold or unknown.
-- Errors: ARITY, WRONG_TYPE, BAD_ID, BAD_NOW, NO_POLICY
--@include lib/args.lua
--@include lib/policy.lua
--@include lib/memory.lua

check_call()
local id = arg_id(ARG.id)
local now = arg_now(ARG.now)
local p, st = load_policy()

local m = read_meta(id)
if not m or m.cold then return 0 end
m.la = now
write_meta(m)
unplace(m)
place(m, now, p, st)
return 1
