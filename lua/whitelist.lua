#!lua
-- whitelist: make a memory whitelisted: its score becomes importance x
-- whitelist_boost and decay no longer touches it. A cold memory is recalled
-- first (hot, freshly protected), which may evict others. Past whitelist_cap,
-- the lowest whitelisted memories by importance x recency (possibly this one)
-- are demoted to ordinary memories.
--
-- KEYS[1] policy: hash, the namespace's Policy
-- KEYS[2] state: hash, epoch, decay and jitter counter
-- KEYS[3] meta: hash, id -> packed metadata
-- KEYS[4] text: hash, id -> text
-- KEYS[5] hot: zset, evictable hot memories by decay key
-- KEYS[6] fresh: zset, protected non-whitelisted hot memories by decay key
-- KEYS[7] prot: zset, possibly protected hot memories by protected-until ms
-- KEYS[8] wl: zset, whitelisted memories by whitelist key
-- KEYS[9] cold: zset, cold memories by last use ms
--
-- ARGV[1] id: string, 1..1024 bytes
-- ARGV[2] now: whole ms since the Unix epoch, or '' for the server clock
--
-- Returns: [score, [evicted id, ...], [demoted id, ...], over] as remember.
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

expire_protection(now)
if m.cold then
  rcall('ZREM', KEY.cold, id)
  refresh(m, now, p)
else
  unplace(m)
end
m.wl = true
write_meta(m)
place(m, now, p, st)
local demoted = cap_whitelist(now, p, st)
m = read_meta(id)
local score = reported(m, ln_score(m, now, p, st), p)
local evicted, over = enforce(now, p)
return {fmt(score), evicted, demoted, over}
