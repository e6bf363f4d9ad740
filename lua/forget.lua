#!lua
-- forget: delete a memory everywhere (hot or cold, metadata and text).
--
-- KEYS[1] meta: hash, id -> packed metadata
-- KEYS[2] text: hash, id -> text
-- KEYS[3] hot: zset, evictable hot memories by decay key
-- KEYS[4] fresh: zset, protected non-whitelisted hot memories by decay key
-- KEYS[5] prot: zset, possibly protected hot memories by protected-until ms
-- KEYS[6] wl: zset, whitelisted memories by whitelist key
-- KEYS[7] cold: zset, cold memories by last use ms
--
-- ARGV[1] id: string, 1..1024 bytes
--
-- Returns: 1 if the memory existed and was deleted, 0 if it was unknown.
-- Errors: ARITY, WRONG_TYPE, BAD_ID
--@include lib/args.lua

check_call()
local id = arg_id(ARG.id)

if rcall('HDEL', KEY.meta, id) == 0 then return 0 end
rcall('HDEL', KEY.text, id)
for _, index in ipairs({KEY.hot, KEY.fresh, KEY.prot, KEY.wl, KEY.cold}) do
  rcall('ZREM', index, id)
end
return 1
