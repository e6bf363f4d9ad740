#!lua flags=no-writes
-- scan: one page of the memories of a tier, with their text, for paging
-- through every memory (HSCAN of the metadata: a memory that stays in the
-- tier for the whole scan is returned at least once, possibly more than
-- once; a page may hold fewer than count memories, or none, before the
-- cursor comes back to 0). Cold memories beyond cold_max are gone and not
-- returned. Read-only.
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
-- ARGV[1] tier: 'hot' or 'cold'
-- ARGV[2] cursor: the cursor a page returned, '0' to start
-- ARGV[3] count: whole number in [1, 200], metadata entries read for this page
-- ARGV[4] now: whole ms since the Unix epoch, or '' for the server clock
--
-- Returns: [cursor, [memory, ...]] with cursor the next page's ('0': done)
--   and each memory as get returns it.
-- Errors: ARITY, BAD_KEYS, WRONG_TYPE, BAD_ARG, BAD_NOW, NO_POLICY
--@include lib/args.lua
--@include lib/policy.lua
--@include lib/memory.lua

check_call()
if ARG.tier ~= 'hot' and ARG.tier ~= 'cold' then fail('BAD_ARG', "tier must be 'hot' or 'cold'") end
-- A cursor is an unsigned 64-bit number: digits only, at most 2^64 - 1.
local c = ARG.cursor
if not string.find(c, '^%d+$') or #c > 20 or (#c == 20 and c > '18446744073709551615') then
  fail('BAD_ARG', 'cursor must be a cursor a page returned, or 0')
end
local count = arg_count(ARG.count, 'count', 1, 200)
local now = arg_now(ARG.now)
local p, st = load_policy()
now = namespace_now(now, st)

local page = rcall('HSCAN', KEY.meta, ARG.cursor, 'COUNT', count)
local cold = ARG.tier == 'cold'
local found = {}
for i = 1, #page[2], 2 do
  local m = unpack_meta(page[2][i], page[2][i + 1])
  if m.cold == cold and not cold_gone(m, p) then found[#found + 1] = m end
end
local out = {}
if #found > 0 then
  local ids = {}
  for i, m in ipairs(found) do ids[i] = m.id end
  local texts = rcall('HMGET', KEY.text, unpack(ids))
  -- The decay keys of the whole page at once (ln_score would ask per memory).
  local keys = {}
  if not cold then
    for _, index in ipairs({KEY.fresh, KEY.hot, KEY.ghot}) do
      for i, key in ipairs(rcall('ZMSCORE', index, unpack(ids))) do
        keys[i] = keys[i] or key
      end
    end
  end
  local imps = {}
  for i, m in ipairs(found) do
    local ln
    if keys[i] and not m.wl then
      ln = ln_decayed(tonumber(keys[i]), now, p, st)
    else
      ln = ln_score(m, now, p, st)
    end
    out[i] = memory_reply(m, reported(m, ln, p), texts[i], imps)
  end
end
return {page[1], out}
