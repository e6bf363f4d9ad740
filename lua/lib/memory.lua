-- Memories, their indexes and the eviction rules, shared by the scripts.
--
-- Layout (every key of a namespace carries the hash tag {namespace}):
--   meta   hash  id -> struct '<ddddddB': importance, jitter, created ms,
--                 last access ms, protected-until ms, G at the last access,
--                 flags (1 cold, 2 whitelisted)
--   text   hash  id -> text (only for memories stored with text)
--   hot    zset  evictable hot memories (not whitelisted, not protected), by decay key
--   fresh  zset  protected hot memories that are not whitelisted, by decay key
--   prot   zset  hot memories whose protection may not have run out, by protected-until ms
--   wl     zset  whitelisted hot memories, by whitelist key
--   cold   zset  cold memories, by last use ms (least recently used first)
--
-- Forward decay: a non-whitelisted memory's score at time t is
--   (importance + jitter) * recency * (decay ticks since last access)
-- with recency = exp(-(G(t) - G(last access))), G the recency clock (wall or
-- activity, see load_policy in lib/policy.lua). (A whitelisted memory's score
-- is importance * whitelist_boost + jitter; jitter < 1 times recency and
-- ticks stays below policy.jitter either way.)
-- Its logarithm splits into a per-memory part fixed at the last access,
--   decay key = ln(importance + jitter) + G(last_access) - D(last_access)
-- and a part shared by the whole namespace, -G(t) + D(t), where D is the
-- running sum of ln(rate) over decay() ticks. Ordering by the decay key is
-- ordering by score at any t, so decay() only adds to D and time only moves
-- t: neither rewrites a single key. Whitelisted memories do not decay, so
-- they live apart, ranked for demotion by the score they would have if
-- demoted (whitelist key = ln(importance + jitter) + G(last_access) - wbase).
-- G(last access) is stored with each memory (m.g), never recomputed from the
-- last access time: after a change of clock or half-life, recency already
-- lost stays lost for every memory, in every score and index. Decay ticks a
-- memory took are folded into its m.g when it leaves the decaying indexes
-- (fold_ticks). D also takes the whole shifts that keep decay keys small, and
-- wbase those of whitelist keys (rebase).
local META = '<ddddddB'

-- Work per call is bounded, so no call blocks the server for long whatever
-- the store size or backlog: a call moves at most WORK memories (protection
-- run out, evictions), demotes at most DEMOTE memories beyond the ones it
-- whitelists itself, and drops at most WORK from the cold tier. What is left
-- waits for the next calls that move memories (stats().backlog counts it).
local WORK = 200
local DEMOTE = 16

local function unpack_meta(id, raw)
  local imp, j, created, la, till, g, flags = struct.unpack(META, raw)
  return {id = id, imp = imp, j = j, created = created, la = la, till = till, g = g,
    cold = flags % 2 == 1, wl = flags >= 2}
end

-- Reads one memory's metadata (nil if unknown); also checks meta's type.
local function read_meta(id)
  local raw = typed_read('HGET', KEY.meta, id)
  if not raw then return nil end
  return unpack_meta(id, raw)
end

local function packed_meta(m)
  local flags = (m.cold and 1 or 0) + (m.wl and 2 or 0)
  return struct.pack(META, m.imp, m.j, m.created, m.la, m.till, m.g, flags)
end

local function write_meta(m)
  rcall('HSET', KEY.meta, m.id, packed_meta(m))
end

-- Where the namespace's clock stands in this call: ms for the wall clock,
-- memories remembered so far (st.seq) for the activity clock.
local function position(now, p, st)
  if p.activity then return st.seq end
  return now
end

-- The recency clock G now. A new clock or half-life starts a new piece of it
-- where the last one stood (configure stores g0 and x0), so no stored key is
-- rewritten.
local function clock(now, p, st)
  return st.g0 + p.lambda * (position(now, p, st) - st.x0)
end

-- Both keys subtract a large offset from G first (G - D, G - wbase), so they
-- stay small and keep the precision of ln(importance + jitter); rebase keeps
-- those offsets near G.
local function decay_key(m, p, st)
  return math.log(m.imp + m.j) + (m.g - st.decay)
end

-- A memory leaving the decaying indexes without an access (evicted, or
-- whitelisted) keeps the decay ticks it took there: they are folded into its
-- G as extra age, so its score never rises (cold), and a demotion later
-- resumes from where it was (see rule 7 in the README).
local function fold_ticks(m, key, st)
  m.g = (key - math.log(m.imp + m.j)) + st.decay
end

local function whitelist_key(m, st)
  return math.log(m.imp + m.j) + (m.g - st.wbase)
end

-- ln of a non-whitelisted hot memory's unfloored score at now, from its decay
-- key alone: the namespace's time never runs backwards (namespace_now), so
-- G(now) is at least every memory's G.
local function ln_decayed(key, now, p, st)
  return key + (st.decay - clock(now, p, st))
end

-- ln of any memory's unfloored score at now. Cold memories keep decaying with
-- time but take no decay() ticks, which apply to hot memories only.
local function ln_score(m, now, p, st)
  if m.cold then
    return math.log(m.imp + m.j) - math.max(0, clock(now, p, st) - m.g)
  end
  if m.wl then return math.log(m.imp * p.whitelist_boost + m.j) end
  local key = rcall('ZSCORE', KEY.fresh, m.id) or rcall('ZSCORE', KEY.hot, m.id)
  if not key then -- its index was lost (README: Lost keys): no decay ticks known
    return math.log(m.imp + m.j) - math.max(0, clock(now, p, st) - m.g)
  end
  return ln_decayed(tonumber(key), now, p, st)
end

-- The score callers see: the floor applies to non-whitelisted memories only.
local function reported(m, ln, p)
  local s = math.exp(ln)
  if not m.wl and s < p.score_min then return p.score_min end
  return s
end

-- Tie-breaking jitter in (0, policy.jitter): Fibonacci hashing of a
-- per-namespace counter, so successive memories get distinct, evenly spread
-- offsets that are the same on every server (Lua's math.random is not).
-- The offset of the n-th remember of the namespace.
local function jitter_at(n, p)
  n = n % 4294967296
  -- n * 2654435769 mod 2^32, split so every product stays exact in a double
  local h = ((n * 40503) % 65536 * 65536 + n * 31161) % 4294967296
  return p.jitter * (h + 0.5) / 4294967296
end

-- The next remember: one more memory remembered on the activity clock.
local function next_jitter(p, st)
  st.seq = rcall('HINCRBY', KEY.state, 'seq', 1)
  return jitter_at(st.seq, p)
end

-- What every script that moves memories reads before its first write: the
-- sizes of the hot tier and the cold tier, and the first memories whose
-- protection ran out by now (one more than a call handles, to see whether
-- more are left). Each read also checks its key's type; text, which these
-- scripts only write (trim_cold), gets a TYPE. The sizes are kept up to date
-- by the helpers that move memories (lift, enforce, trim_cold); work and
-- demote count down this call's budget.
local function read_tiers(now)
  check_types(KEY.text)
  return {
    size = typed_read('ZCARD', KEY.hot) + typed_read('ZCARD', KEY.fresh) +
      typed_read('ZCARD', KEY.wl),
    cold = typed_read('ZCARD', KEY.cold),
    expired = typed_read('ZRANGEBYSCORE', KEY.prot, '-inf', now, 'LIMIT', 0, WORK + 1),
    now = now,
    work = WORK,
    demote = DEMOTE,
  }
end

-- Moves the memories whose protection ran out (t.expired, up to WORK) from
-- fresh to hot. t.expiring: more ran out than this call handles.
local function expire_protection(t)
  local ids = t.expired
  t.expiring = #ids > WORK
  if #ids == 0 then return end
  ids = {unpack(ids, 1, math.min(#ids, WORK))}
  local keys = rcall('ZMSCORE', KEY.fresh, unpack(ids))
  local moved, entries = {}, {}
  for j, id in ipairs(ids) do
    if keys[j] then
      moved[#moved + 1] = id
      entries[#entries + 1] = keys[j]
      entries[#entries + 1] = id
    end
  end
  if #moved > 0 then
    rcall('ZREM', KEY.fresh, unpack(moved))
    rcall('ZADD', KEY.hot, unpack(entries))
  end
  rcall('ZREM', KEY.prot, unpack(ids))
  t.work = t.work - #ids
end

-- The first writes of every script that moves memories: the namespace's
-- latest now (see namespace_now), then the protection that ran out.
-- Keys stay small, so ties stay exact however old the namespace (README:
-- where scores and ties are exact): once G has drifted more than REBASE from
-- the offset of an index's keys (D for hot and fresh, wbase for wl), every
-- key of the index moves back by a whole number and the offset with it, so
-- no score or order changes. Only while the hot tier fits in one call's work.
local REBASE = 4096

local function shift_keys(index, by)
  local entries = rcall('ZRANGE', index, 0, -1, 'WITHSCORES')
  if #entries == 0 then return end
  local moved = {}
  for i = 1, #entries, 2 do
    moved[#moved + 1] = fmt(tonumber(entries[i + 1]) - by)
    moved[#moved + 1] = entries[i]
  end
  rcall('ZADD', index, unpack(moved))
end

local function rebase(t, p, st)
  if t.size > WORK then return end
  local g = clock(t.now, p, st)
  local by = math.floor(g - st.decay)
  if math.abs(by) > REBASE then
    shift_keys(KEY.hot, by)
    shift_keys(KEY.fresh, by)
    st.decay = st.decay + by
    rcall('HSET', KEY.state, 'decay', fmt(st.decay))
  end
  by = math.floor(g - st.wbase)
  if math.abs(by) > REBASE then
    shift_keys(KEY.wl, by)
    st.wbase = st.wbase + by
    rcall('HSET', KEY.state, 'wbase', fmt(st.wbase))
  end
end

local function start_writes(t, p, st)
  if t.now > st.latest then
    rcall('HSET', KEY.state, 'latest', t.now)
    st.latest = t.now
  end
  expire_protection(t)
  rebase(t, p, st)
end

-- Takes a hot memory out of its hot indexes (not meta). Runs after
-- expire_protection, so prot holds it only if its protection runs past now.
local function unplace(m, now)
  if m.wl then
    rcall('ZREM', KEY.wl, m.id)
  elseif rcall('ZREM', KEY.hot, m.id) == 0 then
    rcall('ZREM', KEY.fresh, m.id)
  end
  if m.till > now then rcall('ZREM', KEY.prot, m.id) end
end

-- Puts a hot memory into the index its state calls for; returns its decay
-- key (nil for a whitelisted memory).
local function place(m, now, p, st)
  local protected = m.till > now
  local key
  if m.wl then
    rcall('ZADD', KEY.wl, fmt(whitelist_key(m, st)), m.id)
  else
    key = decay_key(m, p, st)
    rcall('ZADD', protected and KEY.fresh or KEY.hot, fmt(key), m.id)
  end
  if protected then rcall('ZADD', KEY.prot, m.till, m.id) end
  return key
end

-- Takes memory m out of wherever it is (its hot indexes, or the cold tier)
-- before it is placed again; m.new marks a memory that is nowhere yet.
local function lift(m, t)
  if m.new then
    t.size = t.size + 1
  elseif m.cold then
    rcall('ZREM', KEY.cold, m.id)
    t.cold = t.cold - 1
    t.size = t.size + 1
  else
    unplace(m, t.now)
  end
end

-- Marks memory m used now: age 0 on the recency clock. (now is the
-- namespace's, so never behind m's last access; see namespace_now.)
local function use(m, now, p, st)
  m.la = now
  m.g = math.max(m.g or -math.huge, clock(now, p, st))
end

-- Makes a memory as fresh as a new one (remember, recall): hot, protected,
-- its age and accumulated decay ticks started again. Protection only ever
-- grows: a protect_s lowered since keeps the window already given.
local function refresh(m, now, p, st)
  use(m, now, p, st)
  m.till = math.max(m.till or -math.huge, now + p.protect_s * 1000)
  m.cold = false
end

-- Whitelist cap: demotes the lowest by the score they would have if demoted
-- to ordinary memories (kept, not deleted), within the call's budget: a call
-- that whitelisted n memories may demote n + DEMOTE (t.demote). Returns the
-- demoted ids.
local function cap_whitelist(now, p, st, t)
  local excess = math.min(rcall('ZCARD', KEY.wl) - p.whitelist_cap, t.demote)
  if excess <= 0 then return {} end
  t.demote = t.demote - excess
  local ids = rcall('ZRANGE', KEY.wl, 0, excess - 1)
  local demoted = {}
  for _, id in ipairs(ids) do
    local m = read_meta(id)
    if m then
      unplace(m, now)
      m.wl = false
      write_meta(m)
      place(m, now, p, st)
      demoted[#demoted + 1] = id
    else -- its metadata was lost (README: Lost keys): the entry goes
      rcall('ZREM', KEY.wl, id)
    end
  end
  return demoted
end

-- The cold tier keeps its cold_max most recently evicted memories (up to
-- WORK dropped per call; until then reads treat the rest as gone: cold_gone).
local function trim_cold(p, t)
  local excess = math.min(t.cold - p.cold_max, WORK)
  if excess <= 0 then return end
  local ids = rcall('ZRANGE', KEY.cold, 0, excess - 1)
  rcall('HDEL', KEY.meta, unpack(ids))
  rcall('HDEL', KEY.text, unpack(ids))
  rcall('ZREMRANGEBYRANK', KEY.cold, 0, excess - 1)
  t.cold = t.cold - #ids
end

-- Whether cold memory m is beyond cold_max, waiting to be dropped by
-- trim_cold: every call treats it as already gone.
local function cold_gone(m, p)
  if not m.cold then return false end
  local n = typed_read('ZCARD', KEY.cold)
  return n > p.cold_max and typed_read('ZREVRANK', KEY.cold, m.id) >= p.cold_max
end

-- Reads memory id's metadata, or nil if it is unknown or cold_gone.
local function read_live(id, p)
  local m = read_meta(id)
  if m and cold_gone(m, p) then return nil end
  return m
end

-- How the namespace stands against its policy: the sizes of its indexes
-- (size: every hot memory), over (how far the hot tier is above max_hot) and
-- backlog (the memories waiting for work left to later calls: protection run
-- out, evictable memories above max_hot, whitelisted above whitelist_cap,
-- cold above cold_max). backlog 0: the policy holds as if it always had.
local function pressure(p, now)
  local n = {hot = typed_read('ZCARD', KEY.hot), wl = typed_read('ZCARD', KEY.wl),
    cold = typed_read('ZCARD', KEY.cold)}
  n.size = n.hot + typed_read('ZCARD', KEY.fresh) + n.wl
  n.over = math.max(0, n.size - p.max_hot)
  n.backlog = typed_read('ZCOUNT', KEY.prot, '-inf', now) + math.min(n.over, n.hot) +
    math.max(0, n.wl - p.whitelist_cap) + math.max(0, n.cold - p.cold_max)
  return n
end

-- Drops a cold_gone memory now, for a call that remembers its id anew.
local function drop_cold(m, t)
  rcall('HDEL', KEY.meta, m.id)
  rcall('HDEL', KEY.text, m.id)
  rcall('ZREM', KEY.cold, m.id)
  t.cold = t.cold - 1
end

-- When the hot tier holds more than max_hot, moves the lowest-scored
-- evictable memories (plus evict_batch) to the cold tier, as many as the
-- call's budget allows, then trims the cold tier. Whitelisted and protected
-- memories are not in KEY.hot, so they are never taken; nor is a memory in
-- KEY.hot whose protection runs past this call's now (a policy change may
-- have moved it there early): it goes back to KEY.fresh. While protection
-- that ran out waits to be processed (t.expiring) nothing is evicted: the
-- lowest evictable memory may be among those. Returns the evicted ids and
-- how far over max_hot the hot tier still is.
local function enforce(p, st, t)
  local now = t.now
  local excess = t.size - p.max_hot
  if excess <= 0 or t.expiring then
    trim_cold(p, t)
    return {}, math.max(0, excess)
  end
  local want = math.min(excess + p.evict_batch, t.work)
  local evicted, seen = {}, 0
  -- Cold keys: now plus i / 1024 for the i-th evicted at this ms, lowest
  -- score first, so memories evicted at the same ms leave the cold tier by
  -- score (exact while now < 2^42 ms, the year 2109).
  local last = rcall('ZRANGE', KEY.cold, -1, -1, 'WITHSCORES')
  local slot = 0
  if last[2] and tonumber(last[2]) >= now then
    slot = math.min(1023, math.floor((tonumber(last[2]) - now) * 1024 + 0.5) + 1)
  end
  while #evicted < want and seen < t.work do
    local n = math.min(want - #evicted, t.work - seen)
    local entries = rcall('ZRANGE', KEY.hot, seen, seen + n - 1, 'WITHSCORES')
    if #entries == 0 then break end
    seen = seen + #entries / 2
    local ids = {}
    for i = 1, #entries, 2 do ids[#ids + 1] = entries[i] end
    local raws = rcall('HMGET', KEY.meta, unpack(ids))
    local metas, cold = {}, {}
    for i, id in ipairs(ids) do
      local m = raws[i] and unpack_meta(id, raws[i])
      if not m then
        -- its metadata was lost (README: Lost keys): the entry goes with the rest
      elseif m.till > now then
        rcall('ZADD', KEY.fresh, entries[2 * i], id)
        rcall('ZADD', KEY.prot, m.till, id)
      else
        m.cold = true
        fold_ticks(m, tonumber(entries[2 * i]), st)
        metas[#metas + 1] = id
        metas[#metas + 1] = packed_meta(m)
        cold[#cold + 1] = fmt(now + slot / 1024)
        cold[#cold + 1] = id
        slot = math.min(1023, slot + 1)
        evicted[#evicted + 1] = id
      end
    end
    if #cold > 0 then
      rcall('HSET', KEY.meta, unpack(metas))
      rcall('ZADD', KEY.cold, unpack(cold))
    end
  end
  if seen > 0 then
    rcall('ZREMRANGEBYRANK', KEY.hot, 0, seen - 1)
    t.size = t.size - #evicted
    t.cold = t.cold + #evicted
    t.work = t.work - seen
  end
  trim_cold(p, t)
  return evicted, math.max(0, excess - #evicted)
end

-- The end of every call that (re)placed memory m: its score now (key: its
-- decay key from place, or nil to read it back), then the hot tier brought
-- back to max_hot. Returns the reply [score, [evicted id, ...], demoted,
-- over] that remember, touch, whitelist, demote and recall share.
local function settle(m, key, p, st, t, demoted)
  local ln
  if key and not m.wl then
    ln = ln_decayed(key, t.now, p, st)
  else
    ln = ln_score(m, t.now, p, st)
  end
  local evicted, over = enforce(p, st, t)
  return {fmt(reported(m, ln, p)), evicted, demoted, over}
end

local function memory_reply(m, score, text)
  return {m.id, fmt(m.imp), fmt(score), m.cold and 'cold' or 'hot', m.wl and 1 or 0,
    m.till, m.created, m.la, text or false}
end
