#!lua
-- drop: delete a whole namespace: its policy, state, memories, text and
-- every index (the lexical index too) and its eviction log, in one atomic call. UNLINK frees each large key in the
-- server's background thread, so the call takes the same short time
-- whatever the namespace's size and the server is not blocked while the
-- memory is freed. A call's receipt (<prefix>call:<id>) is not listed here
-- and expires on its own within retry_window_s. Any call after the drop
-- finds no namespace: a store that may write configures it again, empty
-- (as after FLUSHDB); a read-only one raises NO_POLICY.
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
--
-- Returns: the number of keys deleted (0: the namespace did not exist).
-- Errors: ARITY, BAD_KEYS
--@include lib/args.lua

check_layout()
return rcall('UNLINK', KEY.policy, KEY.state, KEY.meta, KEY.text, KEY.hot, KEY.fresh, KEY.prot,
  KEY.wl, KEY.cold, KEY.ghot, KEY.groups, KEY.links, KEY.terms, KEY.entries, KEY.entry_of,
  KEY.log)
