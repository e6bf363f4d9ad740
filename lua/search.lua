#!lua flags=no-writes
-- search: the memories that best match a query, by the lexical index (lib/index.lua),
-- best first, each with its relevance: BM25 with every term counted once per
-- memory and no length normalisation, the sum over the query's terms that the
-- memory holds of ln(1 + (N - n + 0.5) / (n + 0.5)), N the memories indexed and
-- n those holding the term; ties go to the memory indexed last. Only memories
-- remembered with text and terms are found. The work is bounded whatever the
-- namespace holds: it reads at most 4,000 postings, the query's rarest terms
-- first, each from its newest. Read-only: it recalls nothing.
--
-- KEYS[1] policy: hash, the namespace's Policy
-- KEYS[2] state: hash, epoch, decay, seq, g0, x0, latest, wbase and tokens (see configure.lua)
-- KEYS[3] meta: hash, id -> packed metadata
-- KEYS[4] text: hash, id -> text
-- KEYS[5] hot: zset, evictable hot memories in no group, by decay key
-- KEYS[6] fresh: zset, protected non-whitelisted hot memories by decay key
-- KEYS[7] cold: zset, cold memories by last use ms
-- KEYS[8] ghot: zset, evictable hot memories in a group, by decay key
-- KEYS[9] terms: hash, the lexical index: term -> its postings (see lib/index.lua)
-- KEYS[10] entries: hash, entry -> id of every memory indexed now
--
-- ARGV[1] terms: the query's terms, as remember's terms (docs/lua-contract.md: terms),
--   at most 32; '' finds nothing
-- ARGV[2] k: whole number in [0, 100], how many memories at most
-- ARGV[3] tier: all|hot|cold, where the memories found may be
-- ARGV[4] now: whole ms since the Unix epoch, or '' for the server clock
--
-- Returns: [[relevance, memory], ...] best first, relevance a string (%.17g) and
--   memory as get returns it.
-- Errors: ARITY, BAD_KEYS, WRONG_TYPE, BAD_TERMS, BAD_ARG, BAD_NOW, NO_POLICY
--@include lib/args.lua
--@include lib/policy.lua
--@include lib/memory.lua

check_call()
local terms = arg_terms(ARG.terms, 'terms')
if #terms > QUERY_TERMS then
  fail('BAD_TERMS', 'a query holds at most ' .. QUERY_TERMS .. ' terms, got ' .. #terms)
end
local k = arg_count(ARG.k, 'k', 0, 100)
local tier = ARG.tier
if tier ~= 'all' and tier ~= 'hot' and tier ~= 'cold' then
  fail('BAD_ARG', 'tier must be all, hot or cold, got ' .. string.sub(tier, 1, 64))
end
local now = arg_now(ARG.now)
local p, st = load_policy()
now = namespace_now(now, st)

local found = {}
local function want(id)
  local m = read_live(id, p)
  if not m or (tier == 'hot' and m.cold) or (tier == 'cold' and not m.cold) then return false end
  found[id] = m
  return true
end
local out = {}
for _, hit in ipairs(search_index(terms, k, want)) do
  local m = found[hit[1]]
  out[#out + 1] = {fmt(hit[2]),
    memory_reply(m, reported(m, ln_score(m, now, p, st), p), rcall('HGET', KEY.text, m.id))}
end
return out
