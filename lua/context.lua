#!lua flags=no-writes
-- context: what window returns, slimmed to what a prompt needs: the ids and
-- texts of the memories window would return for the same budget and now,
-- in the same order. The same choice (lib/window.lua), the same bounds, a
-- reply of 2 values a memory instead of 11. The memories skip names are
-- left out, as if they were not hot (a caller that sends them itself, such
-- as the last messages of a conversation, counts them in its budget; a
-- group's other members may still be in the window). With a query (terms)
-- and a share, in a namespace whose policy has index 1: the window takes the
-- budget less share of it, and the best matches of the query that it did not
-- take (cold, or hot but ranked out) fill that share, by relevance, each with
-- its whole group, at most 50 matches looked at, none below a relevance of 2.5
-- (lib/index.lua: search); what
-- they leave of their share goes back to the window, chosen again with the
-- rest of the budget. All in the order first remembered. Read-only: what a
-- query brings is not recalled.
--
-- KEYS[1] policy: hash, the namespace's Policy
-- KEYS[2] state: hash, epoch, decay, seq, g0, x0, latest, wbase and tokens (see configure.lua)
-- KEYS[3] meta: hash, id -> packed metadata
-- KEYS[4] text: hash, id -> text
-- KEYS[5] hot: zset, evictable hot memories in no group, by decay key
-- KEYS[6] fresh: zset, protected non-whitelisted hot memories by decay key
-- KEYS[7] wl: zset, whitelisted memories by whitelist key
-- KEYS[8] ghot: zset, evictable hot memories in a group, by decay key
-- KEYS[9] links: zset, group .. NUL .. id of every memory in a group (lex order)
-- KEYS[10] cold: zset, cold memories by last use ms
-- KEYS[11] terms: hash, the lexical index: term -> its postings (see lib/index.lua)
-- KEYS[12] entries: hash, entry -> id of every memory indexed now
--
-- ARGV[1] budget: whole number of tokens in [1, 2^53 - 1], or '' for no budget
-- ARGV[2] now: whole ms since the Unix epoch, or '' for the server clock
-- ARGV[3] terms: the query's terms, as search's ('' none: no query)
-- ARGV[4] share: decimal in [0, 1], the part of the budget the query fills ('' = 0);
--   nothing without a budget
-- ARGV[5] detail: 0|1, 1 adds each memory's tokens and order to the reply
-- ARGV[6] skip: 1 per item, repeated 0..100 times: the ids of memories to
--   leave out (each 1..1024 bytes; unknown or cold ones change nothing)
--
-- Returns: [[id, ...], [text, ...], tokens, left, epoch, [recalled id, ...],
--   version, [tokens, ...], [order, ...]]: the memories' ids and texts (nil for a
--   memory stored without text) in the order first remembered; tokens, left and
--   epoch as window returns them (left: the hot memories neither in the reply nor
--   skipped); the ids the query brought; the namespace's version (integer: every
--   call that writes makes a new one; see remember_many.lua); with detail 1, each
--   memory's tokens and order (integers; empty lists with detail 0). With no
--   skip, no query and a budget the whole hot tier fits in (left 0), the reply
--   is the hot tier at that version: what a client that keeps it starts from.
-- Errors: ARITY, BAD_KEYS, WRONG_TYPE, BAD_ARG, BAD_NOW, BAD_ID, BAD_TERMS, NO_POLICY
--@include lib/args.lua
--@include lib/policy.lua
--@include lib/memory.lua
--@include lib/window.lua

check_call()
local budget = math.huge
if ARG.budget ~= '' then budget = arg_count(ARG.budget, 'budget', 1, 9007199254740991) end
local now = arg_now(ARG.now)
local terms, share = arg_query(ARG.terms, ARG.share)
local detail = arg_flag(ARG.detail, 'detail')
if #ARGV > 105 then fail('ARITY', 'context takes at most 100 ids to skip') end
local skip = {}
for i = 6, #ARGV do skip[arg_id(ARGV[i])] = true end
local p, st = load_policy()
now = namespace_now(now, st)

local taken, total, left, recalled = query_window(budget, terms, share, now, p, st, skip)
local ids, brought, sizes, orders = {}, {}, {}, {}
for i, m in ipairs(taken) do ids[i] = m.id end
for i, m in ipairs(recalled) do brought[i] = m.id end
if detail then
  for i, m in ipairs(taken) do sizes[i], orders[i] = m.tokens, m.n end
end
return {ids, texts_of(taken), total, left, st.epoch, brought, st.ver, sizes, orders}
