#!lua flags=no-writes
-- top: the k highest-scored hot memories now, highest first: what the agent
-- puts in its context window. Memories rank by the score they report
-- (whitelisted: importance x boost; others floored at score_min), memories
-- reporting the same score by their unfloored score (floored ones keep their
-- order), then by id. Read-only.
--
-- KEYS[1] policy: hash, the namespace's Policy
-- KEYS[2] state: hash, epoch, decay, seq, g0, x0 and latest (see configure.lua)
-- KEYS[3] meta: hash, id -> packed metadata
-- KEYS[4] text: hash, id -> text
-- KEYS[5] hot: zset, evictable hot memories by decay key
-- KEYS[6] fresh: zset, protected non-whitelisted hot memories by decay key
-- KEYS[7] wl: zset, whitelisted memories by whitelist key
--
-- ARGV[1] k: whole number in [0, 1000], how many memories at most (a bound on the call's work)
-- ARGV[2] now: whole ms since the Unix epoch, or '' for the server clock
--
-- Returns: [memory, ...], each memory as get returns it.
-- Errors: ARITY, BAD_KEYS, WRONG_TYPE, BAD_ARG, BAD_NOW, NO_POLICY
--@include lib/args.lua
--@include lib/policy.lua
--@include lib/memory.lua

check_call()
local k = arg_count(ARG.k, 'k', 0, 1000)
local now = arg_now(ARG.now)
local p, st = load_policy()
now = namespace_now(now, st)
if k == 0 then return {} end

-- Candidates: the k best of each decaying index (their decay keys order them
-- at any time) and every whitelisted memory (at most whitelist_cap).
local ranked = {}
local function add(m, ln)
  ranked[#ranked + 1] = {m = m, ln = ln, score = reported(m, ln, p)}
end
for _, index in ipairs({KEY.hot, KEY.fresh}) do
  local entries = rcall('ZRANGE', index, 0, k - 1, 'REV', 'WITHSCORES')
  for i = 1, #entries, 2 do
    local m = read_meta(entries[i])
    add(m, ln_decayed(tonumber(entries[i + 1]), m, now, p, st))
  end
end
for _, id in ipairs(rcall('ZRANGE', KEY.wl, 0, -1)) do
  local m = read_meta(id)
  add(m, ln_score(m, now, p, st))
end
table.sort(ranked, function(a, b)
  if a.score ~= b.score then return a.score > b.score end
  if a.ln ~= b.ln then return a.ln > b.ln end
  return a.m.id < b.m.id
end)

local out = {}
for i = 1, math.min(k, #ranked) do
  local m = ranked[i].m
  out[i] = memory_reply(m, ranked[i].score, rcall('HGET', KEY.text, m.id))
end
return out
