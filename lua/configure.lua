#!lua
-- configure: store the namespace's Policy (first caller wins) or replace it,
-- and return the policy now in force. Every worker sharing a namespace then
-- runs with the same parameters. The first call also starts the namespace's
-- clock: decay keys count time from this epoch rather than from 1970, which
-- keeps them small and precise. A replaced policy applies at once: a lower
-- whitelist_cap demotes, a lower max_hot, max_tokens or cold_max evicts, in this call.
--
-- KEYS[1] policy: hash, the namespace's Policy
-- KEYS[2] state: hash, field packed: nine doubles (struct '<ddddddddd'): epoch (ms),
--   decay (D: the running sum of ln(rate), plus the whole shifts that keep the decay
--   keys small), seq (memories remembered: the jitter counter and the activity
--   clock), g0 and x0 (the recency clock's value and position, ms or seq, where the
--   policy last changed), latest (the latest now a write used: the namespace's time,
--   which never runs back), wbase (the offset of the whitelist keys), tokens (the hot
--   tier's total tokens), ver (the namespace's version: every call that writes makes
--   a new one; a state made again starts at the server's time in µs); see read_state
--   in lib/policy.lua
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
-- ARGV[1] mode: 'init' stores the policy only if the namespace has none; 'replace' always
--   stores it; 'update' changes the fields given (the others are '') of the stored one
-- ARGV[2] max_hot: whole number >= 1, hot memories kept before eviction starts
-- ARGV[3] evict_batch: whole number >= 0, extra memories evicted once eviction starts
-- ARGV[4] clock: 'activity' or 'wall', what recency is measured in
-- ARGV[5] half_life_memories: number > 0, memories remembered for recency to halve
--   (activity clock)
-- ARGV[6] half_life_s: number > 0, seconds for recency to halve (wall clock)
-- ARGV[7] whitelist_boost: number >= 1, score multiplier of whitelisted memories
-- ARGV[8] whitelist_cap: whole number >= 0, most whitelisted memories at once
-- ARGV[9] protect_s: number >= 0, seconds a remembered or recalled memory cannot be evicted
-- ARGV[10] score_min: number >= 0, floor of reported non-whitelisted scores
-- ARGV[11] jitter: number >= 0, tie-breaking offsets lie in (0, jitter)
-- ARGV[12] cold_max: whole number >= 0, most memories in the cold tier
-- ARGV[13] retry_window_s: number >= 0, seconds a write call's receipt is kept (0: none)
-- ARGV[14] max_tokens: whole number >= 0, most tokens in the hot tier (0: no token budget)
-- ARGV[15] idle_ttl_s: number >= 0, seconds without a write after which the namespace
--   expires with all its keys (0: never)
-- ARGV[16] index: 0|1, 1 keeps the lexical index of the memories' terms (lib/index.lua);
--   0 keeps none (and deletes one kept before)
-- ARGV[17] protect_memories: whole number >= 0, memories remembered after a memory's
--   first remember before it can be evicted: the newest ones are kept (0: none)
-- ARGV[18] log_max: whole number >= 0, most entries of the eviction log (0: no log, and
--   the one kept before is deleted)
-- ARGV[19] now: whole ms since the Unix epoch, or '' for the server clock
-- ARGV[20] seen: '', '?' or '<incarnation>:<revision>', the namespace as the caller
--   last saw it: NAMESPACE_CHANGED, before any write, if its incarnation is not that
--   one (it was made again since, or it does not exist: nothing is made then); the
--   revision is not compared (an update merges another caller's change). '' and '?'
--   check nothing; with '?' or a seen, the reply ends with the namespace's seen
--
-- Returns: [status, max_hot, evict_batch, clock, half_life_memories, half_life_s,
--   whitelist_boost, whitelist_cap, protect_s, score_min, jitter, cold_max,
--   retry_window_s, max_tokens, idle_ttl_s, index, protect_memories, log_max(, seen)] with
--   status one of 'created', 'existing' (init found a policy: the stored one is returned)
--   or 'replaced' (replace or update); the fields as strings, the policy in
--   force after the call. A new clock or half-life applies from now: recency
--   already lost stays lost, and from now on it halves every new half-life of
--   the new clock. No key is rewritten; lower caps apply within the call's
--   bounded work (lib/memory.lua), the rest over the next calls.
--   The policy hash also keeps the namespace's incarnation (the state's epoch,
--   drawn to the microsecond when the namespace is made, kept while any of its
--   keys is: a state rebuilt takes it from here) and the policy's revision (1
--   when made; one more at every replace or update, and whenever the policy is
--   packed again; also in the packed copy): see seen_parts in lib/policy.lua.
--   The reply ends with both, '<incarnation>:<revision>' after the call, unless
--   ARGV seen is '' (the reply of an earlier memevict).
-- Errors: ARITY, BAD_KEYS, WRONG_TYPE, BAD_ARG, BAD_POLICY, BAD_NOW, NO_POLICY,
--   NAMESPACE_CHANGED
--@include lib/args.lua
--@include lib/policy.lua
--@include lib/memory.lua

check_call()
if ARG.mode ~= 'init' and ARG.mode ~= 'replace' and ARG.mode ~= 'update' then
  fail('BAD_ARG', "mode must be 'init', 'replace' or 'update'")
end
local given = {}
for i, f in ipairs(POLICY) do
  if not (ARG.mode == 'update' and ARGV[i + 1] == '') then
    local x, why = policy_value(f, ARGV[i + 1])
    if x == nil then fail('BAD_POLICY', why) end
    given[i] = ARGV[i + 1]
  end
end
local now = arg_now(ARG.now)
local seen_incarnation = ARG.seen ~= '?' and seen_parts(ARG.seen) or nil

local names = policy_names()
names[#POLICY + 1], names[#POLICY + 2] = 'incarnation', 'revision'
local stored = rcall('HMGET', KEY.policy, unpack(names))
local mirror, revision = stored[#POLICY + 1], stored[#POLICY + 2]
stored[#POLICY + 1], stored[#POLICY + 2] = nil, nil
-- The namespace's incarnation: its state's epoch, else (the state lost) the copy
-- the policy keeps; none for a namespace that does not exist.
local st0 = read_state()
local kept = mirror and decimal(mirror)
if kept and not within(kept, 0, 253402300799999) then kept = nil end
local incarnation = st0 and st0.epoch or kept
if seen_incarnation and incarnation ~= seen_incarnation then
  changed(incarnation, revision, ARG.seen)
end
local missing = {}
for i, f in ipairs(POLICY) do -- fields added since the policy was stored
  if stored[1] ~= false and stored[i] == false then stored[i], missing[i] = f[5], true end
end
if ARG.mode == 'update' then -- the fields not given keep their stored values
  if stored[1] == false then fail('NO_POLICY', 'namespace has no policy to update') end
  for i, f in ipairs(POLICY) do
    if not given[i] then
      local _, why = policy_value(f, stored[i] or '')
      if why then
        fail('BAD_POLICY', 'the stored policy was edited: ' .. why .. '; set that field too, ' ..
          'or the whole policy (replace)')
      end
      given[i] = stored[i]
    end
  end
end

-- A new namespace's epoch, its incarnation: the server's time to the microsecond
-- (now's whole ms, with the server's microseconds when now is given), so that a
-- namespace made again, even within the same ms, is another incarnation.
local function new_epoch()
  local t = rcall('TIME')
  local us = tonumber(t[2])
  if ARG.now == '' then return tonumber(t[1]) * 1000 + us / 1000 end
  return now + (us % 1000) / 1000
end

-- The policy the scripts ran with (the packed copy, else sound fields), or nil: a
-- policy damaged past reading is replaced as if the namespace had none.
local was_packed = rcall('HGET', KEY.policy, 'packed')
local function ran_policy()
  local p = was_packed and unpacked_policy(was_packed)
  if p or stored[1] == false then return p end
  local numbers = policy_numbers(stored)
  if valid_numbers(numbers) then return policy_of(numbers) end
end

-- The policy's revision as it stands: its field, else its packed copy's (0: none).
local function revision_now()
  local ran = was_packed and unpacked_policy(was_packed)
  return tonumber(revision) or (ran and tonumber(ran.revision)) or 0
end

local function reply(status, values, rev)
  local out = {status}
  for i = 1, #POLICY do out[i + 1] = values[i] end
  if ARG.seen ~= '' then out[#POLICY + 2] = fmt(read_state().epoch) .. ':' .. fmt(rev) end
  return out
end

-- A state hash lost while memories remain (a stray DEL, or a maxmemory
-- policy that evicts any key) is rebuilt from the newest memory: the last
-- one protected, else the highest in hot, else the newest cold one. Its G
-- and last access restart the clock where that memory left it; decay ticks
-- taken since it was placed are lost (every hot score rises by the same
-- factor, so no order changes); the jitter counter restarts.
local function rebuild_state(p)
  local g0, decay, latest = 0, 0, now
  local id = rcall('ZRANGE', KEY.prot, -1, -1)[1] or rcall('ZRANGE', KEY.hot, -1, -1)[1]
    or rcall('ZRANGE', KEY.ghot, -1, -1)[1] or rcall('ZRANGE', KEY.cold, -1, -1)[1]
  local m = id and read_meta(id)
  if m then
    g0, latest = m.g, math.max(m.la, 0)
    local key = rcall('ZSCORE', KEY.hot, id) or rcall('ZSCORE', KEY.fresh, id) or
      rcall('ZSCORE', KEY.ghot, id)
    if key then decay = m.g - (tonumber(key) - math.log(m.imp + m.j)) end
  end
  local wbase = 0 -- the whitelist keys' offset, from any whitelisted memory
  local wl = rcall('ZRANGE', KEY.wl, -1, -1, 'WITHSCORES')
  local w = wl[1] and read_meta(wl[1])
  if w then wbase = w.g - (tonumber(wl[2]) - math.log(w.imp + w.j)) end
  -- The hot tier's tokens from every hot memory, and the order counter past
  -- every memory's order, cold ones too (one recalled later comes back to its
  -- place): the one rebuild that reads both tiers whole (docs/operations.md: Lost keys).
  local tokens, seq = hot_totals()
  each_meta(KEY.cold, function(m) seq = math.max(seq, m.n) end)
  -- (a version no client saw before: one may hold what it read of the lost state)
  local t = rcall('TIME')
  save_state({epoch = incarnation or new_epoch(), decay = decay, seq = seq, g0 = g0,
    x0 = p.activity and seq or latest,
    latest = latest, wbase = wbase, tokens = tokens,
    ver = tonumber(t[1]) * 1000000 + tonumber(t[2]), changed = true})
end

local has_state = st0 ~= nil
local rebuilt = stored[1] ~= false and not has_state
if rebuilt then
  rebuild_state(ran_policy() or parse_policy(given))
  has_state = true
end
-- Metadata lost whole (a stray DEL): every hot memory is unknown, and so
-- are its tokens; the total starts again from none (docs/operations.md: Lost keys).
-- A state in fields (memevict 0.1.0) has no total: it is summed from the
-- hot tier (each 0.1.0 memory costs 1) and the state packed.
if has_state then
  local st = read_state()
  if st.fields and rcall('HEXISTS', KEY.state, 'tokens') == 0 then
    st.tokens = hot_totals(RECOUNT) or st.tokens
    new_version(st)
    save_state(st)
  elseif st.tokens ~= 0 and rcall('EXISTS', KEY.meta) == 0 then
    st.tokens = 0
    new_version(st)
    save_state(st)
  end
end
-- The packed copy the scripts read (lib/policy.lua) follows the fields: a
-- field edited by hand is checked as a given one and packed again here.
-- A clock or half-life edited by hand starts a new piece of G where the
-- packed policy the scripts ran with left it, as set_policy does (recency
-- already lost stays lost).
-- A field edited to a value out of its range is restored from the packed
-- copy the scripts ran with, when that one is sound.
local function policy_repack()
  local was = was_packed
  local ran = was and unpacked_policy(was)
  for i, f in ipairs(POLICY) do
    local _, why = policy_value(f, stored[i] or '')
    if why and not ran then
      fail('BAD_POLICY', 'the stored policy was edited: ' .. why .. ' (and its packed copy ' ..
        'is damaged): open a store with the whole policy (replace_policy=True), or drop the ' ..
        'namespace (memevict drop)')
    end
    if why then
      local x = ran[f[1]]
      stored[i] = type(x) == 'string' and x or fmt(x)
      missing[i] = true -- (written back below)
    end
  end
  local rev = revision_now()
  local packed = pack_policy(stored, rev)
  if was ~= packed then
    -- A field edited by hand (and valid) changes the policy: one more revision. A
    -- copy damaged, missing or packed by an earlier memevict does not (the scripts
    -- ran with the fields, or refused to run).
    local ok, numbers = pcall(cmsgpack.unpack, was or '')
    if ok and valid_numbers(numbers) then
      local values = policy_numbers(stored)
      for i = 1, #POLICY do
        if numbers[i] ~= values[i] then
          rev = rev + 1
          packed = pack_policy(stored, rev)
          break
        end
      end
    end
    rcall('HSET', KEY.policy, 'packed', packed)
    local old, new = was and unpacked_policy(was), parse_policy(stored)
    if old and (old.activity ~= new.activity or old.lambda ~= new.lambda) then
      local st = read_state()
      local at = namespace_now(now, st)
      st.g0, st.x0 = clock(at, old, st), position(at, new, st)
      new_version(st)
      save_state(st)
    end
  end
  for i, f in ipairs(POLICY) do -- (a field added since the policy was stored, or restored)
    if missing[i] then rcall('HSET', KEY.policy, f[1], stored[i]) end
  end
  return rev
end

-- The policy's fields incarnation and revision in step with the state's epoch and
-- the revision packed (rev).
local function keep_seen(rev)
  local want, text = fmt(read_state().epoch), fmt(rev)
  if mirror ~= want or revision ~= text then
    rcall('HSET', KEY.policy, 'incarnation', want, 'revision', text)
  end
end

if stored[1] ~= false and ARG.mode == 'init' then
  local rev = policy_repack()
  keep_seen(rev)
  -- (a state made again expires with the rest of the namespace)
  if rebuilt then keep_alive(parse_policy(stored)) end
  return reply('existing', stored, rev)
end

local status = 'created'
local g_now = 0 -- the recency clock G where the new policy takes over
-- The new revision: one more than the stored one; 1 for a new namespace; for a
-- policy stored again after it was lost, the server's time in microseconds, so
-- that it meets no revision a caller saw before.
local rev = 1
if stored[1] ~= false then
  status = 'replaced'
  local old_p, old_st = ran_policy() or parse_policy(given), read_state()
  now = namespace_now(now, old_st)
  g_now = clock(now, old_p, old_st)
  rev = revision_now() + 1
elseif has_state then
  local t = rcall('TIME')
  rev = tonumber(t[1]) * 1000000 + tonumber(t[2])
end

local fields = {'packed', pack_policy(given, rev)}
for i, f in ipairs(POLICY) do
  fields[#fields + 1] = f[1]
  fields[#fields + 1] = given[i]
end
rcall('HSET', KEY.policy, unpack(fields))
if not has_state then
  save_state({epoch = new_epoch(), decay = 0, seq = 0, g0 = 0, x0 = 0, latest = 0, wbase = 0,
    tokens = 0, ver = 0, changed = true})
end
-- A new clock or half-life starts a new piece of G at its value now, so
-- recency already lost stays lost and no key changes (O(1)). Unchanged
-- ones give the same G.
local p, st = load_policy()
-- (A policy lost while the state remained keeps the clock where it stands.)
if status == 'replaced' or not has_state then
  st.g0, st.x0 = g_now, position(now, p, st)
  new_version(st)
  save_state(st)
end
if status == 'replaced' then
  local t = read_tiers(now, p, st)
  over_share(t)
  start_writes(t, p, st)
  cap_whitelist(p, st, t)
  enforce(p, st, t)
end
keep_seen(rev)
if p.index == 0 then rcall('UNLINK', KEY.terms, KEY.entries, KEY.entry_of) end
if p.log_max == 0 then
  rcall('UNLINK', KEY.log)
elseif status == 'replaced' then -- (a lowered log_max; check_call checked the log's type)
  rcall('XTRIM', KEY.log, 'MAXLEN', p.log_max)
end
if p.idle_ttl_s > 0 then keep_alive(p) elseif stored[1] ~= false then never_expire() end
return reply(status, given, rev)
