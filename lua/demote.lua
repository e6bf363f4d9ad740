#!lua
-- demote: make a whitelisted memory ordinary again. It keeps its importance
-- and last access; its score becomes importance x recency and decay ticks
-- apply from now on. It may now be evictable, so the hot tier is then
-- brought back to max_hot as remember does. A memory that is not
-- whitelisted is left alone.
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
-- ARGV[1] id: string, 1..1024 bytes
-- ARGV[2] now: whole ms since the Unix epoch, or '' for the server clock
-- ARGV[3] seen: '' or '<incarnation>:<revision>', the namespace as the caller last saw
--   it (the fields incarnation and revision of its policy): NAMESPACE_CHANGED, before any
--   write, if it was made again since or its policy changed ('' checks nothing)
--
-- Returns: [score, [evicted id, ...], [demoted id], over, over_tokens] as remember, with
--   demoted empty when the memory was not whitelisted (nothing changed then).
-- Errors: ARITY, BAD_KEYS, WRONG_TYPE, BAD_ID, BAD_NOW, BAD_ARG, NO_POLICY, NOT_FOUND, REPLY_NOT_KEPT
--   NAMESPACE_CHANGED
--@include lib/args.lua
--@include lib/policy.lua
--@include lib/memory.lua
--@include lib/receipts.lua

check_layout()
local id = arg_id(ARG.id)
local now = arg_now(ARG.now)
local p, st = load_policy(ARG.seen)
now = namespace_now(now, st)

return once(p, st, function()
  local m = read_live(id, p)
  if not m then fail('NOT_FOUND', 'no memory ' .. id) end
  local t = read_tiers(now, p, st)
  if not m.wl then
    return {fmt(reported(m, ln_score(m, now, p, st), p)), {}, {}, over_count(p, t.size),
      over_tokens(p, t.tokens)}
  end
  start_writes(t, p, st)
  if t.log_max > 0 then
    log_left(t, m, 'demote', reported(m, ln_score(m, now, p, st), p))
  end
  lift(m, t)
  m.wl = false
  write_meta(m)
  return settle(m, place(m, t, p, st), p, st, t, {id})
end)
