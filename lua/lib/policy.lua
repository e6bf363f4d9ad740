-- The namespace's Policy (KEY.policy) and its clock state (KEY.state).
-- Both hashes are written by configure; every other script only reads them.

-- Policy fields in ARGV order for configure and reply order everywhere.
-- kind 'int' fields are whole numbers; 'num' fields are finite decimals.
local POLICY = {
  {'max_hot', 'int', 1},
  {'evict_batch', 'int', 0},
  {'half_life_s', 'num', 0, 'exclusive'},
  {'whitelist_boost', 'num', 1},
  {'whitelist_cap', 'int', 0},
  {'protect_s', 'num', 0},
  {'score_min', 'num', 0},
  {'jitter', 'num', 0},
  {'cold_max', 'int', 0},
  {'retry_window_s', 'num', 0},
}
local MAX_INT = 9007199254740992 -- 2^53

-- Parses one policy value; nil and a reason when it is out of range.
local function policy_value(field, s)
  local name, kind, lo, exclusive = field[1], field[2], field[3], field[4]
  local x
  if kind == 'int' then x = whole(s, lo, MAX_INT) else x = decimal(s) end
  if x == nil or x < lo or (exclusive and x == lo) then
    local range = (exclusive and '> ' or '>= ') .. lo
    return nil, name .. ' must be a ' .. (kind == 'int' and 'whole number' or 'finite number') ..
      ' ' .. range .. ', got ' .. string.sub(s, 1, 64)
  end
  return x
end

local function policy_names()
  local names = {}
  for i, f in ipairs(POLICY) do names[i] = f[1] end
  return names
end

local function load_policy()
  local raw = typed_read('HMGET', KEY.policy, unpack(policy_names()))
  local state = typed_read('HMGET', KEY.state, 'epoch', 'decay', 'seq', 'g0', 't0')
  if raw[1] == false or state[1] == false then
    fail('NO_POLICY', 'namespace has no policy; run configure first')
  end
  local p = {}
  for i, f in ipairs(POLICY) do p[f[1]] = tonumber(raw[i]) end
  -- recency = 0.5^(age / half_life_s) = exp(-lambda * age_s)
  p.lambda = math.log(2) / p.half_life_s
  local st = {epoch = tonumber(state[1]), decay = tonumber(state[2]), seq = tonumber(state[3])}
  -- The recency clock's last change of slope (a new half_life_s); none yet:
  -- it has run at one slope since the epoch.
  st.g0 = tonumber(state[4]) or 0
  st.t0 = tonumber(state[5]) or st.epoch
  return p, st
end
