#!lua flags=no-writes
-- get: one memory, hot or cold, with its score now. Read-only, so it runs
-- on replicas and on a server at maxmemory.
--
-- KEYS[1] policy: hash, the namespace's Policy
-- KEYS[2] state: hash, epoch, decay, seq, g0, x0, latest, wbase and tokens (see configure.lua)
-- KEYS[3] meta: hash, id -> packed metadata
-- KEYS[4] text: hash, id -> text
-- KEYS[5] hot: zset, evictable hot memories in no group, by decay key
-- KEYS[6] fresh: zset, protected non-whitelisted hot memories by decay key
-- KEYS[7] cold: zset, cold memories by last use ms
-- KEYS[8] ghot: zset, evictable hot memories in a group, by decay key
--
-- ARGV[1] id: string, 1..1024 bytes
-- ARGV[2] now: whole ms since the Unix epoch, or '' for the server clock
--
-- Returns: nil if unknown, else [id, importance, score, tier, whitelisted,
--   protected_until, created, last_access, text, tokens, group] with
--   importance and score strings (%.17g), tier 'hot' or 'cold', whitelisted
--   0|1, the times whole ms, text nil when none was stored, tokens an
--   integer and group '' for a memory in no group.
-- Errors: ARITY, BAD_KEYS, WRONG_TYPE, BAD_ID, BAD_NOW, NO_POLICY
--@include lib/args.lua
--@include lib/policy.lua
--@include lib/memory.lua

check_call()
local id = arg_id(ARG.id)
local now = arg_now(ARG.now)
local p, st = load_policy()
now = namespace_now(now, st)

local m = read_live(id, p)
if not m then return nil end
return memory_reply(m, reported(m, ln_score(m, now, p, st), p), rcall('HGET', KEY.text, id))
