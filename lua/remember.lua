#!lua
-- remember: add a memory to the hot tier or update it (upsert), then, if the
-- hot tier holds more than max_hot memories or max_tokens tokens, evict the
-- lowest-ranked evictable memories and groups to the cold tier, all in one
-- atomic call.
-- An existing id (hot or cold) gets the new importance and tokens, keeps its
-- creation time and its place in the window's order, keeps its text unless
-- has_text is 1, keeps its whitelist status unless whitelist is 1, keeps its
-- group unless group is given, and becomes as fresh as a new memory: last
-- access = now, protected for protect_s, decay ticks started again, a new
-- jitter offset. A memory in a group brings the group's cold members back
-- with it (a group is always in one tier).
-- Whitelisting past whitelist_cap demotes the lowest whitelisted memories
-- (by importance x recency; possibly this one) to ordinary memories.
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
-- ARGV[2] importance: decimal number, finite and > 0
-- ARGV[3] text: string, stored when has_text is 1, else ignored
-- ARGV[4] has_text: 0|1, 1 stores text (replacing any), 0 keeps the stored text
-- ARGV[5] whitelist: 0|1, 1 whitelists the memory, 0 keeps its whitelist status
-- ARGV[6] tokens: whole number in [1, 1e9], the memory's cost in the token budget
-- ARGV[7] group: string, 0..256 bytes without NUL: the group the memory joins
--   (leaving its current one); '' keeps its group (none for a new memory)
-- ARGV[8] now: whole ms since the Unix epoch, or '' for the server clock
-- ARGV[9] seen: '' or '<incarnation>:<revision>', the namespace as the caller last saw
--   it (the fields incarnation and revision of its policy): NAMESPACE_CHANGED, before any
--   write, if it was made again since or its policy changed ('' checks nothing)
-- ARGV[10] terms: '' or the text's terms for the lexical index (docs/lua-contract.md:
--   terms), 1..64 bytes each without NUL, joined by single spaces, at most 256; with
--   has_text 1 the memory is indexed by them ('' none) when the policy's index is 1,
--   with has_text 0 it must be ''
--
-- Returns: [score, [evicted id, ...], [demoted id, ...], over, over_tokens]
--   where score is the memory's score now (string, %.17g) and over and
--   over_tokens (integers) are how far the hot tier is still above max_hot
--   and max_tokens because only whitelisted and protected memories are left
--   to evict (or the call's bounded work left the rest to later calls).
-- Errors: ARITY, BAD_KEYS, WRONG_TYPE, BAD_ID, BAD_IMPORTANCE, BAD_ARG, BAD_TOKENS, BAD_GROUP,
--   BAD_NOW, BAD_TERMS, NO_POLICY, OVER_BUDGET, GROUP_FULL, REPLY_NOT_KEPT, NAMESPACE_CHANGED
--@include lib/args.lua
--@include lib/policy.lua
--@include lib/memory.lua
--@include lib/receipts.lua

check_layout()
local id = arg_id(ARG.id)
local importance = arg_importance(ARG.importance)
local has_text = arg_flag(ARG.has_text, 'has_text')
local whitelist = arg_flag(ARG.whitelist, 'whitelist')
local tokens = arg_tokens(ARG.tokens)
local group = arg_group(ARG.group)
local now = arg_now(ARG.now)
local terms = arg_terms(ARG.terms, 'terms')
if not has_text and #terms > 0 then fail('BAD_TERMS', 'terms need has_text 1 (they index the text)') end
local p, st = load_policy(ARG.seen)
now = namespace_now(now, st)
check_budget(tokens, p)

return once(p, st, function()
  local m = read_meta(id)
  local gone = m and cold_gone(m, p)
  local members = join_check(not gone and m or nil, group)
  local t = read_tiers(now, p, st, 1)
  if members then t.members[group] = members end
  -- Writes start here.
  start_writes(t, p, st)
  if gone then drop_cold(m, t) end
  if gone or not m then m = {id = id, created = now, wl = false, new = true, group = ''} end
  local new = m.new -- (not indexed: never was, or drop_cold unindexed it)
  local was_hot = not new and not m.cold
  if was_hot then t.tokens = t.tokens - m.tokens end
  m.tokens = tokens
  lift(m, t)
  if was_hot then t.tokens = t.tokens + tokens end
  m.imp = importance
  m.j = next_jitter(p, st)
  m.n = m.n or st.seq
  m.wl = m.wl or whitelist
  local moved = group ~= '' and group ~= m.group -- (into a group that may be cold)
  join(m, group, t)
  refresh(m, now, p, st)
  write_meta(m)
  if has_text then
    rcall('HSET', KEY.text, id, ARG.text)
    if p.index == 1 then reindex({{id, terms}}, new) end
  end
  local key = place(m, t, p, st)
  if moved or not was_hot then bring_group(m, p, st, t) end -- (a hot one's group is hot)

  local demoted = {}
  if whitelist then
    t.demote = t.demote + 1
    demoted = cap_whitelist(p, st, t)
    m, key = read_meta(id), nil
  end
  return settle(m, key, p, st, t, demoted)
end)
