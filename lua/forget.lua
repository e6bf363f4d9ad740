#!lua
-- forget: delete a memory everywhere (hot or cold, metadata and text). An
-- unknown id (or one beyond cold_max, already gone for every reader) fails
-- with NOT_FOUND, as every call naming a memory does except get.
--
-- KEYS[1] policy: hash, the namespace's Policy
-- KEYS[2] state: hash, epoch, decay, seq, g0, x0 and latest (see configure.lua)
-- KEYS[3] meta: hash, id -> packed metadata
-- KEYS[4] text: hash, id -> text
-- KEYS[5] hot: zset, evictable hot memories by decay key
-- KEYS[6] fresh: zset, protected non-whitelisted hot memories by decay key
-- KEYS[7] prot: zset, possibly protected hot memories by protected-until ms
-- KEYS[8] wl: zset, whitelisted memories by whitelist key
-- KEYS[9] cold: zset, cold memories by last use ms
-- KEYS[10] receipt: string, <prefix>call:<call id>, the id unique per call (0..64 bytes):
--   a repeat within retry_window_s returns the first reply and writes nothing
--   (an empty id keeps no receipt)
--
-- ARGV[1] id: string, 1..1024 bytes
--
-- Returns: 1 (the memory was deleted).
-- Errors: ARITY, BAD_KEYS, WRONG_TYPE, BAD_ID, BAD_ARG, NO_POLICY, NOT_FOUND, REPLY_NOT_KEPT
--@include lib/args.lua
--@include lib/policy.lua
--@include lib/memory.lua
--@include lib/receipts.lua

check_layout()
local id = arg_id(ARG.id)
local p = load_policy()

return once(p, function()
  check_types(KEY.meta, KEY.text, KEY.hot, KEY.fresh, KEY.prot, KEY.wl, KEY.cold)
  if not read_live(id, p) then fail('NOT_FOUND', 'no memory ' .. id) end
  rcall('HDEL', KEY.meta, id)
  rcall('HDEL', KEY.text, id)
  for _, index in ipairs({KEY.hot, KEY.fresh, KEY.prot, KEY.wl, KEY.cold}) do
    rcall('ZREM', index, id)
  end
  return 1
end)
