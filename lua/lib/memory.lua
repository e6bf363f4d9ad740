-- Memories, their indexes and the eviction rules, shared by the scripts.
--
-- Layout (every key of a namespace carries the hash tag {namespace}):
--   meta   hash  id -> struct '<dddddB': importance, jitter, created ms,
--                 last access ms, protected-until ms, flags (1 cold, 2 whitelisted)
--   text   hash  id -> text (only for memories stored with text)
--   hot    zset  evictable hot memories (not whitelisted, not protected), by decay key
--   fresh  zset  protected hot memories that are not whitelisted, by decay key
--   prot   zset  hot memories whose protection may not have run out, by protected-until ms
--   wl     zset  whitelisted hot memories, by whitelist key
--   cold   zset  cold memories, by last use ms (least recently used first)
--
-- Forward decay: a non-whitelisted memory's score at time t is
--   (importance + jitter) * 0.5^(age / half_life_s) * (decay ticks since last access)
-- (a whitelisted one's is importance * whitelist_boost + jitter; jitter < 1 times
-- recency and ticks stays below policy.jitter either way)
-- Its logarithm splits into a per-memory part fixed at the last access,
--   decay key = ln(importance + jitter) + lambda * (last_access - epoch) - D(last_access)
-- and a part shared by the whole namespace, -lambda * (t - epoch) + D(t), where
-- D is the running sum of ln(rate) over decay() ticks. Ordering by the decay
-- key is ordering by score at any t, so decay() only adds to D and time only
-- moves t: neither rewrites a single key. Whitelisted memories do not decay,
-- so they live apart, ranked for demotion by importance x recency
-- (whitelist key = ln(importance + jitter) + lambda * (last_access - epoch)).
local META = '<dddddB'
local CHUNK = 1000 -- stay under Lua's unpack() stack limit

local function read_meta(id)
  local raw = rcall('HGET', KEY.meta, id)
  if not raw then return nil end
  local imp, j, created, la, till, flags = struct.unpack(META, raw)
  return {id = id, imp = imp, j = j, created = created, la = la, till = till,
    cold = flags % 2 == 1, wl = flags >= 2}
end

local function write_meta(m)
  local flags = (m.cold and 1 or 0) + (m.wl and 2 or 0)
  rcall('HSET', KEY.meta, m.id, struct.pack(META, m.imp, m.j, m.created, m.la, m.till, flags))
end

-- Runs cmd key ids... in chunks.
local function each_chunk(cmd, key, ids)
  for i = 1, #ids, CHUNK do
    rcall(cmd, key, unpack(ids, i, math.min(i + CHUNK - 1, #ids)))
  end
end

local function decay_key(m, p, st)
  return math.log(m.imp + m.j) + p.lambda * (m.la - st.epoch) / 1000 - st.decay
end

local function whitelist_key(m, p, st)
  return math.log(m.imp + m.j) + p.lambda * (m.la - st.epoch) / 1000
end

-- ln of a non-whitelisted hot memory's unfloored score at now, from its decay
-- key. A `now` before the last access (explicit times) counts as age 0.
local function ln_decayed(key, m, now, p, st)
  return key - p.lambda * (math.max(now, m.la) - st.epoch) / 1000 + st.decay
end

-- ln of any memory's unfloored score at now. Cold memories keep decaying with
-- time but take no decay() ticks, which apply to hot memories only.
local function ln_score(m, now, p, st)
  if m.cold then
    return math.log(m.imp + m.j) - p.lambda * math.max(0, now - m.la) / 1000
  end
  if m.wl then return math.log(m.imp * p.whitelist_boost + m.j) end
  local key = rcall('ZSCORE', KEY.fresh, m.id) or rcall('ZSCORE', KEY.hot, m.id)
  return ln_decayed(tonumber(key), m, now, p, st)
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
local function next_jitter(p)
  local n = rcall('HINCRBY', KEY.state, 'seq', 1) % 4294967296
  -- n * 2654435769 mod 2^32, split so every product stays exact in a double
  local h = ((n * 40503) % 65536 * 65536 + n * 31161) % 4294967296
  return p.jitter * (h + 0.5) / 4294967296
end

-- Takes a hot memory out of every hot index (not meta).
local function unplace(m)
  rcall('ZREM', KEY.hot, m.id)
  rcall('ZREM', KEY.fresh, m.id)
  rcall('ZREM', KEY.wl, m.id)
  rcall('ZREM', KEY.prot, m.id)
end

-- Puts a hot memory into the index its state calls for.
local function place(m, now, p, st)
  local protected = m.till > now
  if m.wl then
    rcall('ZADD', KEY.wl, fmt(whitelist_key(m, p, st)), m.id)
  else
    rcall('ZADD', protected and KEY.fresh or KEY.hot, fmt(decay_key(m, p, st)), m.id)
  end
  if protected then rcall('ZADD', KEY.prot, m.till, m.id) end
end

-- Makes a memory as fresh as a new one (remember, recall): hot, protected,
-- its age and accumulated decay ticks started again.
local function refresh(m, now, p)
  m.la = now
  m.till = now + p.protect_s * 1000
  m.cold = false
end

-- Moves memories whose protection ran out from fresh to hot.
local function expire_protection(now)
  local ids = rcall('ZRANGEBYSCORE', KEY.prot, '-inf', now)
  if #ids == 0 then return end
  for _, id in ipairs(ids) do
    local key = rcall('ZSCORE', KEY.fresh, id)
    if key then
      rcall('ZREM', KEY.fresh, id)
      rcall('ZADD', KEY.hot, key, id)
    end
  end
  rcall('ZREMRANGEBYSCORE', KEY.prot, '-inf', now)
end

-- Whitelist cap: demotes the lowest by importance x recency to ordinary
-- memories (kept, not deleted). Returns the demoted ids.
local function cap_whitelist(now, p, st)
  local excess = rcall('ZCARD', KEY.wl) - p.whitelist_cap
  if excess <= 0 then return {} end
  local ids = rcall('ZRANGE', KEY.wl, 0, excess - 1)
  for _, id in ipairs(ids) do
    local m = read_meta(id)
    m.wl = false
    write_meta(m)
    unplace(m)
    place(m, now, p, st)
  end
  return ids
end

-- The cold tier keeps its cold_max most recently used memories.
local function trim_cold(p)
  local excess = rcall('ZCARD', KEY.cold) - p.cold_max
  if excess <= 0 then return end
  local ids = rcall('ZRANGE', KEY.cold, 0, excess - 1)
  each_chunk('HDEL', KEY.meta, ids)
  each_chunk('HDEL', KEY.text, ids)
  rcall('ZREMRANGEBYRANK', KEY.cold, 0, excess - 1)
end

-- Every hot memory: evictable, protected and whitelisted.
local function hot_size()
  return rcall('ZCARD', KEY.hot) + rcall('ZCARD', KEY.fresh) + rcall('ZCARD', KEY.wl)
end

-- When the hot tier holds more than max_hot, moves the lowest-scored
-- evictable memories (plus evict_batch) to the cold tier. Whitelisted and
-- protected memories are not in KEY.hot, so they are never taken; nor is a
-- memory in KEY.hot whose protection runs past this call's now (a worker
-- whose clock is behind the one that moved it there): it goes back to
-- KEY.fresh. Returns the evicted ids and how far over max_hot the hot tier
-- still is.
local function enforce(now, p)
  local excess = hot_size() - p.max_hot
  if excess <= 0 then return {}, 0 end
  local want = excess + p.evict_batch
  local evicted, seen = {}, 0
  while #evicted < want do
    local ids = rcall('ZRANGE', KEY.hot, seen, seen + want - #evicted - 1, 'WITHSCORES')
    if #ids == 0 then break end
    seen = seen + #ids / 2
    for i = 1, #ids, 2 do
      local m = read_meta(ids[i])
      if m.till > now then
        rcall('ZADD', KEY.fresh, ids[i + 1], m.id)
        rcall('ZADD', KEY.prot, m.till, m.id)
      else
        m.cold = true
        write_meta(m)
        rcall('ZADD', KEY.cold, now, m.id)
        evicted[#evicted + 1] = m.id
      end
    end
  end
  if seen > 0 then
    rcall('ZREMRANGEBYRANK', KEY.hot, 0, seen - 1)
    trim_cold(p)
  end
  return evicted, math.max(0, excess - #evicted)
end

-- The end of every call that (re)placed memory m: its score now, then the hot
-- tier brought back to max_hot. Returns the reply [score, [evicted id, ...],
-- demoted, over] that remember, touch, whitelist, demote and recall share.
local function settle(m, now, p, st, demoted)
  local score = reported(m, ln_score(m, now, p, st), p)
  local evicted, over = enforce(now, p)
  return {fmt(score), evicted, demoted, over}
end

local function memory_reply(m, score, text)
  return {m.id, fmt(m.imp), fmt(score), m.cold and 'cold' or 'hot', m.wl and 1 or 0,
    m.till, m.created, m.la, text or false}
end
