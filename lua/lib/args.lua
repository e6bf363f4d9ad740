-- Argument checks shared by every script. The loader defines KEY, KEY_TYPE,
-- ARG, SCRIPT, NKEYS and NARGS from the script's header before this file.
-- Every check raises a typed error (first word = code) and runs before the
-- script's first write, so a rejected call changes nothing.
local rcall = redis.call -- in the functions library each function binds it (memevict/functions.py)

local function fail(code, detail)
  error(redis.error_reply(code .. ' ' .. detail))
end

-- Arity and key layout, in Lua alone. Every key must be <prefix><role> with
-- one prefix shared by all KEYS (the namespace's, from the Python package),
-- so a caller cannot swap two keys of the same type or mix namespaces. The
-- receipt key of a write is <prefix>call:<call id>, the id at most 64 bytes.
local MAX_CALL_BYTES = 64
local PREFIX -- the namespace's key prefix, set by check_layout
local function check_layout()
  -- GROUP > 0: the last ARGV repeats in groups of GROUP values, at least
  -- GROUP_MIN times (remember_many, context).
  local args_ok = #ARGV == NARGS
  if GROUP > 0 then
    local rest = #ARGV - (NARGS - 1)
    args_ok = rest >= GROUP * GROUP_MIN and rest % GROUP == 0
  end
  if #KEYS ~= NKEYS or not args_ok then
    local want = GROUP > 0 and (NARGS - 1) .. ' + ' .. GROUP .. ' per item' or NARGS
    fail('ARITY', SCRIPT .. ' takes ' .. NKEYS .. ' keys and ' .. want ..
      ' args, got ' .. #KEYS .. ' and ' .. #ARGV)
  end
  local prefix = string.sub(KEYS[1], 1, #KEYS[1] - #KEY_ROLE[1])
  PREFIX = prefix
  for i = 1, NKEYS do
    local ok = string.sub(prefix, -1) == ':'
    if KEY_ROLE[i] == 'receipt' then
      local head = prefix .. 'call:'
      ok = ok and string.sub(KEYS[i], 1, #head) == head and #KEYS[i] - #head <= MAX_CALL_BYTES
    else
      ok = ok and KEYS[i] == prefix .. KEY_ROLE[i]
    end
    if not ok then
      local role = KEY_ROLE[i] == 'receipt' and 'call:<call id of at most 64 bytes>' or KEY_ROLE[i]
      fail('BAD_KEYS', 'KEYS[' .. i .. '] must be <prefix>:' .. role ..
        ' with the prefix of KEYS[1], got ' .. string.sub(KEYS[i], 1, 300))
    end
  end
end

-- A key of the wrong type planted in the namespace would fail a script at
-- its first command on that key, possibly after earlier writes (Redis does
-- not roll back). So every key's type is checked before the first write:
-- by a read the script needs anyway (typed_read), or, for a key a script
-- only writes, by TYPE (check_types).
local function type_of(key)
  for i = 1, NKEYS do
    if KEYS[i] == key then return KEY_TYPE[i] end
  end
end

local function wrong_type(key, found)
  fail('WRONG_TYPE', key .. ' is a ' .. found .. ', expected a ' .. type_of(key))
end

local function typed_read(cmd, key, ...)
  local reply = redis.pcall(cmd, key, ...)
  if type(reply) == 'table' and reply.err then
    if string.find(reply.err, '^WRONGTYPE') then wrong_type(key, rcall('TYPE', key).ok) end
    error(reply)
  end
  return reply
end

local function check_types(...)
  for _, key in ipairs({...}) do
    local found = rcall('TYPE', key).ok
    if found ~= 'none' and found ~= type_of(key) then wrong_type(key, found) end
  end
end

-- A command the user's ACL refuses would fail a script where it is first
-- called, possibly after writes. Read-only scripts and configure ask the ACL
-- for every command in COMMANDS (from the loader) first: configure for the
-- commands of every script, so a store refused any of them is refused when
-- it is made, before it runs a write script (MemoryStore runs configure).
-- Each is asked with a key of the namespace (so key patterns count too) and
-- filler arguments: Valkey 9.1 crashes on acl_check_cmd('set') without them.
-- (Commands whose every argument is a key get no filler: it would be asked
-- as a key outside the namespace.)
local KEYS_ONLY = {unlink = true, persist = true, exists = true}
local function check_acl()
  for _, command in ipairs(COMMANDS) do
    local allowed
    if KEYS_ONLY[command] then
      allowed = redis.acl_check_cmd(command, KEYS[1])
    else
      allowed = redis.acl_check_cmd(command, KEYS[1], '0', '0', '0')
    end
    if not allowed then
      fail('NOPERM', 'this user may not run ' .. command .. ', which memevict calls')
    end
  end
end

-- Every check at once, for the scripts that are not on the hot path.
local function check_call()
  check_layout()
  check_acl()
  check_types(unpack(KEYS))
end

-- A strict decimal number: tonumber alone accepts 'inf', 'nan', '0x1A' and
-- surrounding spaces. Returns nil for anything else or non-finite.
local function decimal(s)
  -- (a match without digits, such as '.', '+' or 'e', tonumber refuses)
  if #s > 64 or not string.find(s, '^[+-]?%d*%.?%d*[eE]?[+-]?%d*$') then return nil end
  local x = tonumber(s)
  if x == nil or x ~= x or x == math.huge or x == -math.huge then return nil end
  return x
end

-- A whole number in [lo, hi], digits only.
local function whole(s, lo, hi)
  if not string.find(s, '^%d+$') or #s > 16 then return nil end
  local x = tonumber(s)
  if x < lo or x > hi then return nil end
  return x
end

local MAX_ID_BYTES = 1024
local MIN_NOW_MS = 946684800000 -- 2000-01-01T00:00:00Z: a now in seconds is far below
local MAX_NOW_MS = 253402300799999 -- 9999-12-31T23:59:59.999Z

local function arg_id(s)
  if #s == 0 or #s > MAX_ID_BYTES then
    fail('BAD_ID', 'id must be 1..' .. MAX_ID_BYTES .. ' bytes, got ' .. #s)
  end
  return s
end

local MAX_IMPORTANCE = 1e12 -- times whitelist_boost (at most 1e6): scores stay finite

local function arg_importance(s)
  local x = decimal(s)
  if x == nil or x <= 0 or x > MAX_IMPORTANCE then
    fail('BAD_IMPORTANCE', 'importance must be a number in (0, 1e12], got ' .. string.sub(s, 1, 64))
  end
  return x
end

-- A memory's cost in the token budget: a whole number of tokens.
local MAX_TOKENS = 1000000000

local function arg_tokens(s)
  local x = whole(s, 1, MAX_TOKENS)
  if x == nil then
    fail('BAD_TOKENS', 'tokens must be a whole number in [1, ' .. MAX_TOKENS .. '], got ' ..
      string.sub(s, 1, 64))
  end
  return x
end

-- A group's name: up to 256 bytes without a NUL byte ('': none given).
local MAX_GROUP_BYTES = 256

local function arg_group(s)
  if #s > MAX_GROUP_BYTES or string.find(s, '\0', 1, true) then
    fail('BAD_GROUP', 'group must be 0..' .. MAX_GROUP_BYTES .. ' bytes without a NUL byte')
  end
  return s
end

local function arg_rate(s)
  local x = decimal(s)
  if x == nil or x <= 0 or x > 1 then
    fail('BAD_RATE', 'rate must be a number in (0, 1], got ' .. string.sub(s, 1, 64))
  end
  return x
end

local function arg_flag(s, name)
  if s ~= '0' and s ~= '1' then fail('BAD_ARG', name .. ' must be 0 or 1') end
  return s == '1'
end

local function arg_count(s, name, lo, hi)
  local x = whole(s, lo, hi)
  if x == nil then
    fail('BAD_ARG', name .. ' must be a whole number in [' .. lo .. ', ' .. hi .. ']')
  end
  return x
end

-- Milliseconds since the Unix epoch; '' means the server clock, so workers
-- on hosts with skewed clocks agree.
local function arg_now(s)
  if s == '' then
    local t = rcall('TIME')
    return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  local x = whole(s, MIN_NOW_MS, MAX_NOW_MS)
  if x == nil then
    fail('BAD_NOW', 'now must be whole milliseconds since the Unix epoch in [' .. MIN_NOW_MS ..
      ' (2000-01-01), ' .. MAX_NOW_MS .. "] or '' (a time in seconds is 1000 times too small)")
  end
  return x
end

-- Numbers leave Lua as strings: a Lua number in a reply is truncated to an
-- integer, and tostring keeps only 14 significant digits.
local function fmt(x)
  return string.format('%.17g', x)
end
