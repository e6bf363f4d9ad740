#!lua
-- remember_many: remember a batch of memories in one atomic call, as if each
-- were remembered in turn at the same now (see remember.lua), then evict
-- once: the hot tier is brought back to its budgets after the whole batch, so the
-- lowest by their scores at the end of the batch go (evicting after each item
-- could pick others when an item re-remembers a memory lower), and
-- evict_batch extra go once. The way to batch where pipelines of scripts are
-- refused (redis-py on a cluster).
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
-- ARGV[3] texts: '0' or '1', 1 returns the text of each memory the call evicted (for
--   a summariser: read as the memory left, in the same atomic call)
-- ARGV[4] items: 8 per item, repeated 1..100 times (a bound on the call's
--   work): id, importance, text, has_text, whitelist, tokens, group, terms, each as
--   in remember.lua; the items' terms at most 256 in all (BAD_TERMS)
--
-- Returns: [[score, ...], [evicted id, ...], [demoted id, ...], over,
--   over_tokens, version, [order, ...], [moved id, ...], [evicted text, ...]] with one
--   score per item
--   in order (its score right after it was remembered, string %.17g); evicted,
--   demoted, over and over_tokens as remember returns them; the namespace's
--   version this call made (integer; the one before it is version - 1: every call
--   that writes makes one); each item's order (integer: where the window places
--   it, the order of its first remember); and the ids the items' groups brought
--   back from the cold tier or dropped (members an item joining a group moved).
--   So a client that holds the hot tier as it was at version - 1 knows it now:
--   the items (those not evicted), at their orders, and the moved ids changed.
--   With texts 1, each evicted memory's text (nil for one stored without), in the
--   order of the evicted ids; with texts 0 an empty list.
-- Errors: ARITY, BAD_KEYS, WRONG_TYPE, BAD_ID, BAD_IMPORTANCE, BAD_ARG, BAD_TOKENS, BAD_GROUP,
--   BAD_NOW, BAD_TERMS, NO_POLICY, OVER_BUDGET, GROUP_FULL, REPLY_NOT_KEPT, NAMESPACE_CHANGED
--@include lib/args.lua
--@include lib/policy.lua
--@include lib/memory.lua
--@include lib/receipts.lua

check_layout()
local now = arg_now(ARG.now)
local want_texts = arg_flag(ARG.texts, 'texts')
-- The items' arguments, one array per field (a table per item costs more).
local ids, imps, texts, has_texts, wls, toks, groups, terms = {}, {}, {}, {}, {}, {}, {}, {}
local n = 0
for i = 4, #ARGV, 8 do
  n = n + 1
  ids[n] = arg_id(ARGV[i])
  imps[n] = arg_importance(ARGV[i + 1])
  texts[n] = ARGV[i + 2]
  has_texts[n] = arg_flag(ARGV[i + 3], 'has_text')
  wls[n] = arg_flag(ARGV[i + 4], 'whitelist')
  toks[n] = arg_tokens(ARGV[i + 5])
  groups[n] = arg_group(ARGV[i + 6])
  terms[n] = arg_terms(ARGV[i + 7], 'terms')
  if not has_texts[n] and #terms[n] > 0 then
    fail('BAD_TERMS', 'terms need has_text 1 (they index the text)')
  end
end
if n > 100 then fail('ARITY', 'remember_many takes at most 100 items') end
check_call_terms(terms)
local p, st = load_policy(ARG.seen)
now = namespace_now(now, st)
for i = 1, n do check_budget(toks[i], p) end

return once(p, st, function()
  local raws = typed_read('HMGET', KEY.meta, unpack(ids))
  local gone = {} -- ids stored cold beyond cold_max: remembered anew
  local joining = {} -- group -> ids joining it in this batch
  for i = 1, n do
    local m = raws[i] and unpack_meta(ids[i], raws[i])
    if m and cold_gone(m, p) then gone[ids[i]], m = true, nil end
    local g = groups[i]
    if g ~= '' and not (m and m.group == g) then
      joining[g] = joining[g] or {}
      joining[g][ids[i]] = true
    end
  end
  for g, joiners in pairs(joining) do -- every group checked before the first write
    local count = 0
    for _ in pairs(joiners) do count = count + 1 end
    if typed_read('ZLEXCOUNT', KEY.links, group_range(g)) + count >
        GROUP_MAX then
      fail('GROUP_FULL', 'group ' .. string.sub(g, 1, 256) .. ' would have more than ' ..
        GROUP_MAX .. ' members')
    end
  end
  local t = read_tiers(now, p, st, n)
  t.texts = want_texts and {} or nil -- (filled by to_cold as memories leave)
  -- Writes start here.
  start_writes(t, p, st)
  local seq = st.seq
  st.changed = true -- (st.seq becomes seq + n below)
  local scores, demoted, seen, moved = {}, {}, {}, {}
  -- The writes of items met once and never whitelisted are sent together
  -- (one HSET / ZADD per key for the batch); an item that another item or
  -- the whitelist cap reads back first sends what is pending.
  local function nothing_pending()
    return {meta = {}, text = {}, hot = {}, fresh = {}, prot = {}}
  end
  local pending = nothing_pending()
  local function send_pending()
    if #pending.meta > 0 then
      rcall('HSET', KEY.meta, unpack(pending.meta))
      if #pending.text > 0 then rcall('HSET', KEY.text, unpack(pending.text)) end
      for _, role in ipairs({'hot', 'fresh', 'prot'}) do
        if #pending[role] > 0 then rcall('ZADD', KEY[role], unpack(pending[role])) end
      end
    end
    pending = nothing_pending()
  end
  local function add(role, a, b)
    local values = pending[role]
    values[#values + 1] = a
    values[#values + 1] = b
  end
  for i = 1, n do
    local id, wl = ids[i], wls[i]
    -- An id met earlier in the batch (or demoted by it) is as the batch left it.
    if gone[id] and not seen[id] and not moved[id] then
      drop_cold(unpack_meta(id, raws[i]), t)
      raws[i] = false
    end
    local m = seen[id] or (not moved[id] and raws[i] and unpack_meta(id, raws[i]))
      or {id = id, created = now, wl = false, new = true, group = ''}
    local direct = seen[id] ~= nil or wl or m.wl or m.group ~= '' or groups[i] ~= ''
    if direct then send_pending() end
    local was_hot = not m.new and not m.cold
    if was_hot then t.tokens = t.tokens - m.tokens end
    m.tokens = toks[i]
    lift(m, t)
    if was_hot then t.tokens = t.tokens + m.tokens end
    m.new = false
    m.imp = imps[i]
    st.seq = seq + i -- remembered in turn: one step of the activity clock each
    m.j = jitter_at(st.seq, p)
    m.n = m.n or st.seq
    m.wl = m.wl or wl
    refresh(m, now, p, st)
    local key
    if direct then
      local moved_in = groups[i] ~= '' and groups[i] ~= m.group
      join(m, groups[i], t)
      write_meta(m)
      if has_texts[i] then rcall('HSET', KEY.text, id, texts[i]) end
      key = place(m, t, p, st)
      for _, other in ipairs((was_hot and not moved_in) and {} or bring_group(m, p, st, t)) do
        moved[other] = true -- (read again: it was recalled or dropped)
        seen[other] = read_meta(other)
      end
    else -- as write_meta, HSET text and place do (no group: hot, not ghot)
      add('meta', m.id, packed_meta(m))
      if has_texts[i] then add('text', m.id, texts[i]) end
      key = decay_key(m, p, st)
      local held = protected(m, t)
      add(held and 'fresh' or 'hot', fmt(key), m.id)
      if held then add('prot', prot_score(m, t), m.id) end
    end
    seen[id] = m
    if wl then
      t.demote = t.demote + 1
      for _, other in ipairs(cap_whitelist(p, st, t)) do
        demoted[#demoted + 1] = other
        seen[other] = read_meta(other)
      end
      m, key = seen[id], nil
    end
    local ln = key and ln_decayed(key, now, p, st) or ln_score(m, now, p, st)
    scores[i] = fmt(reported(m, ln, p))
  end
  send_pending()
  -- The texts written, indexed (each id as its last item with text left it),
  -- before enforce: a memory it deletes leaves the index with it.
  local indexing, last = {}, {}
  for i = 1, n do
    if has_texts[i] then last[ids[i]] = i end
  end
  for i = 1, n do
    if last[ids[i]] == i then indexing[#indexing + 1] = {ids[i], terms[i]} end
  end
  if #indexing > 0 and p.index == 1 then
    local kept, new = {}, true
    for j, item in ipairs(indexing) do kept[j] = item[1] end
    local there = rcall('HMGET', KEY.meta, unpack(kept))
    kept = {}
    for j, item in ipairs(indexing) do -- (not one the batch dropped again)
      if there[j] then kept[#kept + 1] = item end
      if raws[last[item[1]]] then new = false end -- (indexed before the batch, maybe)
    end
    reindex(kept, new)
  end
  local evicted, over, over_tok = enforce(p, st, t)
  local orders, brought = {}, {}
  for i = 1, n do
    local m = seen[ids[i]] -- (nil: dropped by a later item's group, so in moved too)
    orders[i] = m and m.n or 0
  end
  for id in pairs(moved) do brought[#brought + 1] = id end
  table.sort(brought) -- (a reply independent of the table's order)
  return {scores, evicted, demoted, over, over_tok, st.ver, orders, brought, t.texts or {}}
end)
