-- Argument checks shared by every script. The loader defines KEY, KEY_TYPE,
-- ARG, SCRIPT, NKEYS and NARGS from the script's header before this file.
-- Every check raises a typed error (first word = code) and runs before the
-- script's first write, so a rejected call changes nothing.
local rcall = redis.call

local function fail(code, detail)
  error(redis.error_reply(code .. ' ' .. detail))
end

-- ACL, arity, key layout and key types. A command the user's ACL refuses
-- would fail the script where it is first called, possibly after writes, so
-- every command the script may call (COMMANDS, from the loader) is asked first. Every key must be <prefix><role> with one
-- prefix shared by all KEYS (the namespace's, from the Python package),
-- so a caller cannot swap two keys of the same type or mix namespaces. A key
-- of the wrong type planted in the namespace would otherwise fail half way
-- through a script, after earlier writes.
local function check_call()
  for _, command in ipairs(COMMANDS) do
    if not redis.acl_check_cmd(command) then
      fail('NOPERM', 'this user may not run ' .. command .. ', which ' .. SCRIPT .. ' calls')
    end
  end
  if #KEYS ~= NKEYS or #ARGV ~= NARGS then
    fail('ARITY', SCRIPT .. ' takes ' .. NKEYS .. ' keys and ' .. NARGS ..
      ' args, got ' .. #KEYS .. ' and ' .. #ARGV)
  end
  local prefix = string.sub(KEYS[1], 1, #KEYS[1] - #KEY_ROLE[1])
  for i = 1, NKEYS do
    if string.sub(prefix, -1) ~= ':' or KEYS[i] ~= prefix .. KEY_ROLE[i] then
      fail('BAD_KEYS', 'KEYS[' .. i .. '] must be <prefix>:' .. KEY_ROLE[i] ..
        ' with the prefix of KEYS[1], got ' .. string.sub(KEYS[i], 1, 300))
    end
  end
  for i = 1, NKEYS do
    local t = rcall('TYPE', KEYS[i]).ok
    if t ~= 'none' and t ~= KEY_TYPE[i] then
      fail('WRONG_TYPE', KEYS[i] .. ' is a ' .. t .. ', expected a ' .. KEY_TYPE[i])
    end
  end
end

-- A strict decimal number: tonumber alone accepts 'inf', 'nan', '0x1A' and
-- surrounding spaces. Returns nil for anything else or non-finite.
local function decimal(s)
  if #s == 0 or #s > 64 or not string.find(s, '%d')
      or not string.find(s, '^[+-]?%d*%.?%d*[eE]?[+-]?%d*$') then
    return nil
  end
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
local MAX_CALL_BYTES = 64
local MAX_NOW_MS = 253402300799999 -- 9999-12-31T23:59:59.999Z

local function arg_id(s)
  if #s == 0 or #s > MAX_ID_BYTES then
    fail('BAD_ID', 'id must be 1..' .. MAX_ID_BYTES .. ' bytes, got ' .. #s)
  end
  return s
end

-- A call id for receipts (lib/receipts.lua): up to 64 bytes, '' for none.
local function arg_call(s)
  if #s > MAX_CALL_BYTES then
    fail('BAD_ARG', 'call must be at most ' .. MAX_CALL_BYTES .. ' bytes, got ' .. #s)
  end
  return s
end

local function arg_importance(s)
  local x = decimal(s)
  if x == nil or x <= 0 then
    fail('BAD_IMPORTANCE', 'importance must be a finite number > 0, got ' .. string.sub(s, 1, 64))
  end
  return x
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
  local x = whole(s, 0, MAX_NOW_MS)
  if x == nil then
    fail('BAD_NOW', "now must be whole milliseconds in [0, " .. MAX_NOW_MS .. "] or ''")
  end
  return x
end

-- Numbers leave Lua as strings: a Lua number in a reply is truncated to an
-- integer, and tostring keeps only 14 significant digits.
local function fmt(x)
  return string.format('%.17g', x)
end
