#!lua flags=no-writes
-- top: the k highest-scored hot memories now, highest first: what the agent
-- puts in its context window. Memories rank by the score they report
-- (whitelisted: importance x boost; others floored at score_min), memories
-- reporting the same score by their unfloored score (floored ones keep their
-- order), then by id. Read-only.
--
-- KEYS[1] policy: hash, the namespace's Policy
-- KEYS[2] state: hash, epoch, decay, seq, g0, x0, latest, wbase and tokens (see configure.lua)
-- KEYS[3] meta: hash, id -> packed metadata
-- KEYS[4] text: hash, id -> text
-- KEYS[5] hot: zset, evictable hot memories in no group, by decay key
-- KEYS[6] fresh: zset, protected non-whitelisted hot memories by decay key
-- KEYS[7] wl: zset, whitelisted memories by whitelist key
-- KEYS[8] ghot: zset, evictable hot memories in a group, by decay key
--
-- ARGV[1] k: whole number in [0, 200], how many memories at most (a bound on the call's work)
-- ARGV[2] now: whole ms since the Unix epoch, or '' for the server clock
--
-- Returns: [memory, ...], each memory as get returns it.
-- Errors: ARITY, BAD_KEYS, WRONG_TYPE, BAD_ARG, BAD_NOW, NO_POLICY
--@include lib/args.lua
--@include lib/policy.lua
--@include lib/memory.lua

check_call()
local k = arg_count(ARG.k, 'k', 0, 200)
local now = arg_now(ARG.now)
local p, st = load_policy()
now = namespace_now(now, st)
if k == 0 then return {} end

-- Candidates: the k best of each decaying index, ranked by their decay keys
-- alone (no metadata read), and every whitelisted memory (at most
-- whitelist_cap); metadata and text are read for the k returned only.
local ranked = {}
local function add(id, m, ln)
  local score = math.exp(ln)
  if not m and score < p.score_min then score = p.score_min end -- the floor
  ranked[#ranked + 1] = {id = id, m = m, ln = ln, score = score}
end
for _, index in ipairs({KEY.hot, KEY.ghot, KEY.fresh}) do
  local entries = rcall('ZRANGE', index, 0, k - 1, 'REV', 'WITHSCORES')
  for i = 1, #entries, 2 do
    add(entries[i], nil, ln_decayed(tonumber(entries[i + 1]), now, p, st))
  end
end
for _, id in ipairs(rcall('ZRANGE', KEY.wl, 0, -1)) do
  local m = read_meta(id)
  if m then add(id, m, ln_score(m, now, p, st)) end -- (no metadata: lost, skipped)
end
table.sort(ranked, function(a, b)
  if a.score ~= b.score then return a.score > b.score end
  if a.ln ~= b.ln then return a.ln > b.ln end
  return a.id < b.id
end)

local out, imps = {}, {}
for _, r in ipairs(ranked) do
  if #out == k then break end
  local m = r.m or read_meta(r.id)
  if m then out[#out + 1] = memory_reply(m, r.score, rcall('HGET', KEY.text, r.id), imps) end
end
return out
