#!lua
-- configure: store the namespace's Policy (first caller wins) or replace it,
-- and return the policy now in force. Every worker sharing a namespace then
-- runs with the same parameters. The first call also starts the namespace's
-- clock: decay keys count time from this epoch rather than from 1970, which
-- keeps them small and precise. A replaced policy applies at once: a lower
-- whitelist_cap demotes, a lower max_hot or cold_max evicts, in this call.
--
-- KEYS[1] policy: hash, the namespace's Policy fields
-- KEYS[2] state: hash, epoch (ms), decay (running sum of ln(rate)), seq (jitter counter),
--   g0 and t0 (the recency clock's value and time at the last new half_life_s)
-- KEYS[3] meta: hash, id -> packed metadata
-- KEYS[4] text: hash, id -> text
-- KEYS[5] hot: zset, evictable hot memories by decay key
-- KEYS[6] fresh: zset, protected non-whitelisted hot memories by decay key
-- KEYS[7] prot: zset, possibly protected hot memories by protected-until ms
-- KEYS[8] wl: zset, whitelisted memories by whitelist key
-- KEYS[9] cold: zset, cold memories by last use ms
--
-- ARGV[1] mode: 'init' stores the policy only if the namespace has none; 'replace' always stores it
-- ARGV[2] max_hot: whole number >= 1, hot memories kept before eviction starts
-- ARGV[3] evict_batch: whole number >= 0, extra memories evicted once eviction starts
-- ARGV[4] half_life_s: number > 0, seconds for recency to halve
-- ARGV[5] whitelist_boost: number >= 1, score multiplier of whitelisted memories
-- ARGV[6] whitelist_cap: whole number >= 0, most whitelisted memories at once
-- ARGV[7] protect_s: number >= 0, seconds a remembered or recalled memory cannot be evicted
-- ARGV[8] score_min: number >= 0, floor of reported non-whitelisted scores
-- ARGV[9] jitter: number >= 0, tie-breaking offsets lie in (0, jitter)
-- ARGV[10] cold_max: whole number >= 0, most memories in the cold tier
-- ARGV[11] retry_window_s: number >= 0, seconds a write call's receipt is kept (0: none)
-- ARGV[12] now: whole ms since the Unix epoch, or '' for the server clock
--
-- Returns: [status, max_hot, evict_batch, half_life_s, whitelist_boost,
--   whitelist_cap, protect_s, score_min, jitter, cold_max, retry_window_s] with status one of
--   'created', 'existing' (init found a policy: the stored one is returned)
--   or 'replaced'; the fields as strings, the policy in force after the call.
--   A new half_life_s applies from now: recency already lost stays lost,
--   and from now on it halves every half_life_s. O(1): no key is rewritten.
-- Errors: ARITY, BAD_KEYS, WRONG_TYPE, BAD_ARG, BAD_POLICY, BAD_NOW
--@include lib/args.lua
--@include lib/policy.lua
--@include lib/memory.lua

check_call()
if ARG.mode ~= 'init' and ARG.mode ~= 'replace' then
  fail('BAD_ARG', "mode must be 'init' or 'replace'")
end
local given = {}
for i, f in ipairs(POLICY) do
  local x, why = policy_value(f, ARGV[i + 1])
  if x == nil then fail('BAD_POLICY', why) end
  given[i] = ARGV[i + 1]
end
local now = arg_now(ARG.now)

local stored = rcall('HMGET', KEY.policy, unpack(policy_names()))

local function reply(status, values)
  local out = {status}
  for i = 1, #POLICY do out[i + 1] = values[i] end
  return out
end

if stored[1] ~= false and ARG.mode == 'init' then
  return reply('existing', stored)
end

local status = 'created'
if stored[1] ~= false then
  status = 'replaced'
  -- A new half-life changes the recency clock's slope from now on: G(now)
  -- under the old slope becomes the new starting point. No key changes.
  local old_p, old_st = load_policy()
  if tonumber(given[3]) ~= old_p.half_life_s then
    rcall('HSET', KEY.state, 'g0', fmt(clock(now, old_p, old_st)), 't0', now)
  end
end

local fields = {}
for i, f in ipairs(POLICY) do
  fields[#fields + 1] = f[1]
  fields[#fields + 1] = given[i]
end
rcall('HSET', KEY.policy, unpack(fields))
if rcall('HSETNX', KEY.state, 'epoch', now) == 1 then
  rcall('HSET', KEY.state, 'decay', 0, 'seq', 0)
end
if status == 'replaced' then
  local p, st = load_policy()
  local t = read_tiers(now)
  expire_protection(t)
  cap_whitelist(now, p, st)
  enforce(p, t)
end
return reply(status, given)
