#!lua flags=no-writes
-- window: the hot memories an agent puts in its prompt, in the order they
-- were first remembered (the order of the conversation), with their text.
-- With a token budget: the highest-ranked memories and groups whose tokens
-- fit in it, a group whole or not at all. Units are taken from the highest
-- score down (as top ranks them; a group at the rank of its highest
-- member); one that does not fit in what is left is skipped and smaller
-- ones below it may still fit. Without a budget: every hot memory.
-- The call's work is bounded: with a budget, by what it returns (at most
-- budget memories, as each costs at least a token) and by 100 candidates
-- in a row not taken (too big for what is left, or their group is), after
-- which it stops; no count of memories cuts a window below its budget.
-- Without a budget, at most 400 memories are returned and 1,000 candidates
-- examined: past that, the highest-ranked. With a query's terms and a share,
-- in a namespace whose policy has index 1, the window takes the budget less
-- the share, and the memories that best match the query that it did not take
-- (cold, or hot but ranked out) fill the share, each with its whole group;
-- what they leave goes back to the window (as context.lua: its header says
-- the rule). Read-only: nothing is recalled.
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
--
-- Returns: [[memory, ...], tokens, left, epoch, [recalled id, ...]] with each
--   memory as get returns it, in the order first remembered; tokens (integer)
--   their total, left (integer) the hot memories not in the window, and epoch
--   (integer) the ms at which the namespace's state began: it changes only when
--   the namespace is created again (its keys were lost: FLUSHDB, idle_ttl_s, a
--   restart without persistence), so a client can tell a lost namespace; the
--   ids the query brought.
-- Errors: ARITY, BAD_KEYS, WRONG_TYPE, BAD_ARG, BAD_NOW, BAD_TERMS, NO_POLICY
--@include lib/args.lua
--@include lib/policy.lua
--@include lib/memory.lua
--@include lib/window.lua

check_call()
local budget = math.huge
if ARG.budget ~= '' then budget = arg_count(ARG.budget, 'budget', 1, 9007199254740991) end
local now = arg_now(ARG.now)
local terms, share = arg_query(ARG.terms, ARG.share)
local p, st = load_policy()
now = namespace_now(now, st)

local taken, total, left, recalled = query_window(budget, terms, share, now, p, st, {}, true)
local texts = texts_of(taken)
local out, brought = {}, {}
local imps = {}
for i, m in ipairs(taken) do out[i] = memory_reply(m, m.score, texts[i], imps) end
for i, m in ipairs(recalled) do brought[i] = m.id end
return {out, total, left, st.epoch, brought}
