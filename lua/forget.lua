#!lua
-- forget: delete a memory everywhere (hot or cold, metadata and text), with
-- every other member of its group. An unknown id (or one beyond cold_max,
-- already gone for every reader) fails with NOT_FOUND, as every call naming
-- a memory does except get.
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
-- ARGV[2] seen: '' or '<incarnation>:<revision>', the namespace as the caller last saw
--   it (the fields incarnation and revision of its policy): NAMESPACE_CHANGED, before any
--   write, if it was made again since or its policy changed ('' checks nothing)
--
-- Returns: the number of memories deleted (1, or the size of its group).
-- Errors: ARITY, BAD_KEYS, WRONG_TYPE, BAD_ID, BAD_ARG, NO_POLICY, NOT_FOUND, REPLY_NOT_KEPT
--   NAMESPACE_CHANGED
--@include lib/args.lua
--@include lib/policy.lua
--@include lib/memory.lua
--@include lib/receipts.lua

check_layout()
local id = arg_id(ARG.id)
local p, st = load_policy(ARG.seen)

return once(p, st, function()
  check_types(KEY.meta, KEY.text, KEY.hot, KEY.fresh, KEY.prot, KEY.wl, KEY.cold, KEY.ghot,
    KEY.groups, KEY.links, KEY.state, KEY.terms, KEY.entries, KEY.entry_of)
  if p.log_max > 0 then check_types(KEY.log) end
  local m = read_live(id, p)
  if not m then fail('NOT_FOUND', 'no memory ' .. id) end
  local ids = {id}
  if m.group ~= '' then
    ids = members_of(m.group)
    if #ids == 0 then ids = {id} end -- (its link was lost: docs/operations.md, Lost keys)
  end
  local raws = rcall('HMGET', KEY.meta, unpack(ids))
  local tokens, links, cold = 0, {}, 0
  for i, x in ipairs(ids) do
    local y = raws[i] and unpack_meta(x, raws[i])
    if y and not y.cold then tokens = tokens + y.tokens end
    if y and y.cold then cold = cold + 1 end
    if y and y.group ~= '' then links[#links + 1] = y.group .. '\0' .. x end
  end
  -- (the log's time: the server's, as the namespace sees it)
  local t = {cold = 0, cold_max = p.cold_max, members = {}, log_max = p.log_max, p = p, st = st,
    now = p.log_max > 0 and namespace_now(arg_now(''), st) or 0}
  if cold > 0 then -- (live cold memories leave: the line holds, see hold_cold_line)
    t.cold = rcall('ZCARD', KEY.cold)
    hold_cold_line(t, cold)
  end
  if t.log_max > 0 then
    for i, x in ipairs(ids) do
      local y = raws[i] and unpack_meta(x, raws[i])
      if y then
        local from = y.cold and 'cold' or (y.wl and 'whitelist' or 'hot')
        log_left(t, y, 'forget', reported(y, ln_score(y, t.now, p, st), p), from)
      end
    end
  end
  unindex(ids)
  rcall('HDEL', KEY.meta, unpack(ids))
  rcall('HDEL', KEY.text, unpack(ids))
  for _, index in ipairs({KEY.hot, KEY.ghot, KEY.fresh, KEY.prot, KEY.wl, KEY.cold}) do
    rcall('ZREM', index, unpack(ids))
  end
  if #links > 0 then rcall('ZREM', KEY.links, unpack(links)) end
  if m.group ~= '' then rcall('ZREM', KEY.groups, m.group) end
  if tokens > 0 then
    st.tokens, st.changed = st.tokens - tokens, true
    if st.tokens < 0 then st.tokens = hot_totals(RECOUNT) or 0 end -- (see enforce)
    save_state(st)
  end
  return #ids
end)
