-- Memories, their indexes and the eviction rules, shared by the scripts.
--
-- Layout (every key of a namespace carries the hash tag {namespace}):
--   meta   hash  id -> struct '<ddddddBdd': importance, jitter, created ms,
--                 last access ms, protected-until ms, G at the last access,
--                 flags (1 cold, 2 whitelisted), tokens, order (the seq of
--                 its first remember), then its group's name (no group: none)
--   text   hash  id -> text (only for memories stored with text)
--   hot    zset  evictable hot memories (not whitelisted, not protected) that
--                 are in no group, by decay key
--   ghot   zset  evictable hot memories that are in a group, by decay key
--   groups zset  evictable groups (every member in ghot), by the highest
--                 decay key of their members: the unit eviction takes whole
--   links  zset  group .. '\0' .. id of every memory in a group (hot or
--                 cold), all at score 0: a group's members are one lex range
--   fresh  zset  protected hot memories that are not whitelisted, by decay key
--   prot   zset  hot memories whose protection may not have run out: by
--                 protected-until ms while that lies ahead, else (protected
--                 as one of the newest, see protected) by ACTIVITY + order
--   wl     zset  whitelisted hot memories, by whitelist key
--   cold   zset  cold memories, by last use ms (least recently used first)
--
-- The state hash also keeps tokens, the total tokens of the hot tier,
-- updated by every call that moves a memory in or out of it (no call sums
-- the tier). The members of a group are always in the same tier: they are
-- evicted, recalled and forgotten together.
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
--@include lib/index.lua
local META = '<ddddddBdd'
local META_BYTES = 65 -- the fixed part; the group's name follows
local META_V1 = '<ddddddB' -- 0.1.0's 49 bytes: read as 1 token, no group

-- Work per call is bounded, so no call blocks the server for long whatever
-- the store size or backlog: a call moves at most WORK memories (protection
-- run out, evictions), demotes at most DEMOTE memories beyond the ones it
-- whitelists itself, and drops at most WORK from the cold tier. What is left
-- waits for the next calls that move memories (stats().backlog counts it).
local WORK = 200
local DEMOTE = 16

local function unpack_meta(id, raw)
  local imp, j, created, la, till, g, flags, tokens, n
  if #raw < META_BYTES then
    imp, j, created, la, till, g, flags = struct.unpack(META_V1, raw)
    tokens, n = 1, 0
  else
    imp, j, created, la, till, g, flags, tokens, n = struct.unpack(META, raw)
  end
  return {id = id, imp = imp, j = j, created = created, la = la, till = till, g = g,
    cold = flags % 2 == 1, wl = flags >= 2, tokens = tokens, n = n,
    group = string.sub(raw, META_BYTES + 1)}
end

-- Reads one memory's metadata (nil if unknown); also checks meta's type.
local function read_meta(id)
  local raw = typed_read('HGET', KEY.meta, id)
  if not raw then return nil end
  return unpack_meta(id, raw)
end

local function packed_meta(m)
  local flags = (m.cold and 1 or 0) + (m.wl and 2 or 0)
  return struct.pack(META, m.imp, m.j, m.created, m.la, m.till, m.g, flags, m.tokens, m.n) ..
    m.group
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
-- resumes from where it was (see rule 7 in docs/rules.md).
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
  local key = rcall('ZSCORE', KEY.fresh, m.id) or
    rcall('ZSCORE', m.group == '' and KEY.hot or KEY.ghot, m.id)
  if not key then -- its index was lost (docs/operations.md: Lost keys): no decay ticks known
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
  st.seq, st.changed = st.seq + 1, true
  return jitter_at(st.seq, p)
end

-- Groups (linked memories). A group's members are one lex range of links:
-- a group name holds no '\0' byte, so group .. '\0' .. id sorts before
-- group .. '\1' and after every other group's entries.
local GROUP_MAX = 100 -- members per group: one call handles a whole group

-- The lex range of group g's entries in links.
local function group_range(g)
  return '[' .. g .. '\0', '(' .. g .. '\1'
end

local function members_of(group)
  local entries = typed_read('ZRANGEBYLEX', KEY.links, group_range(group))
  local ids = {}
  for i, entry in ipairs(entries) do ids[i] = string.sub(entry, #group + 2) end
  return ids
end

local function link_of(m)
  return m.group .. '\0' .. m.id
end

-- members_of, read once per group per call (t.members) until a link of the
-- group is added or removed.
local function members_in(g, t)
  local ids = t.members[g]
  if not ids then
    ids = members_of(g)
    t.members[g] = ids
  end
  return ids
end

-- Puts group g in groups, by its highest member key, if every member is
-- evictable (in ghot); takes it out otherwise. Called for every group a call
-- changed (t.dirty) before anything is evicted.
local function regroup(g, t)
  local ids = members_in(g, t)
  if #ids == 0 then
    rcall('ZREM', KEY.groups, g)
    return
  end
  local keys = rcall('ZMSCORE', KEY.ghot, unpack(ids))
  local top = -math.huge
  for i = 1, #ids do
    if not keys[i] then
      rcall('ZREM', KEY.groups, g)
      return
    end
    top = math.max(top, tonumber(keys[i]))
  end
  rcall('ZADD', KEY.groups, fmt(top), g)
end

local function regroup_dirty(t)
  for g in pairs(t.dirty) do regroup(g, t) end
  t.dirty = {}
end

-- The decaying index of an evictable memory.
local function evictable_index(m)
  return m.group == '' and KEY.hot or KEY.ghot
end

-- Protection: a hot memory is protected (in fresh, or wl, and in prot;
-- never evicted) while either holds:
--   time      its protected-until ms lies ahead (protect_s from its last
--             remember or recall: m.till > now)
--   activity  it is one of the namespace's newest: fewer than
--             protect_memories memories were remembered after its first
--             remember (its order m.n above t.newest, the order counter as
--             the call leaves it less protect_memories); at most a tenth of
--             max_hot (p.protect_newest), so nine tenths of the hot tier stay
--             ranked whatever protect_memories a small max_hot is given; and
--             only one of at most max_tokens / (2 x protect_newest) tokens (if
--             max_tokens > 0), so that together they hold at most half of the
--             budget: more would push the rest of the hot tier out
-- Both are judged at the call's now and end-of-call order, so protection
-- runs out only between calls. prot ranks a memory by its protected-until
-- ms while that lies ahead, else by ACTIVITY + its order: every ms (at most
-- the year 9999 plus protect_s) lies below ACTIVITY, and every order is
-- exact above it, so one range of prot is what ran out by time and one what
-- ran out by activity.
local ACTIVITY = 2 ^ 50

local function protected(m, t)
  return m.till > t.now or (m.n > t.newest and m.tokens <= t.held_tokens)
end

-- Its score in prot (for a protected memory).
local function prot_score(m, t)
  if m.till > t.now then return m.till end
  return ACTIVITY + m.n
end

-- The protection that ran out by the call's now and order (at most limit
-- ids; for stats and backlog counts, use ran_out_count).
local function ran_out(now, newest, limit)
  local ids = typed_read('ZRANGEBYSCORE', KEY.prot, '-inf', now, 'LIMIT', 0, limit)
  if #ids < limit then
    local more = rcall('ZRANGEBYSCORE', KEY.prot, ACTIVITY, ACTIVITY + newest, 'LIMIT', 0,
      limit - #ids)
    for _, id in ipairs(more) do ids[#ids + 1] = id end
  end
  return ids
end

local function ran_out_count(now, newest)
  return typed_read('ZCOUNT', KEY.prot, '-inf', now) +
    rcall('ZCOUNT', KEY.prot, ACTIVITY, ACTIVITY + newest)
end

-- How many hot memories are protected at now and order newest.
local function protected_count(now, newest)
  return rcall('ZCOUNT', KEY.prot, '(' .. fmt(now), '(' .. fmt(ACTIVITY)) +
    rcall('ZCOUNT', KEY.prot, '(' .. fmt(ACTIVITY + newest), '+inf')
end

-- The eviction log (docs/rules.md, rule 15): every memory that leaves a tier
-- is one entry of the stream KEY.log, written by the call that moves it: its
-- id, the reason, its score and importance as it left, the call's now (at),
-- and its group when it has one. The reason says where it went:
--   max_hot, max_tokens, evict_batch   hot -> cold (enforce: the budget it
--                                      was over, or the batch's extra ones)
--   cold_max                           cold -> deleted (past the cold tier's line)
--   whitelist_cap, demote              whitelist -> hot
--   forget                             its tier (field from) -> deleted
-- The stream keeps exactly the newest log_max entries (0: no log): MAXLEN
-- without ~, which costs a remember 1-9% more than trimming whole nodes
-- (benchmarks/RESULTS.md, "What the eviction log costs"). While the log is on, its
-- type is checked with the others before the first write (read_tiers).
local function log_left(t, m, reason, score, from)
  t.at = t.at or fmt(t.now)
  local fields = {'id', m.id, 'reason', reason, 'score', fmt(score), 'importance', fmt(m.imp),
    'at', t.at}
  if m.group ~= '' then
    fields[#fields + 1], fields[#fields + 2] = 'group', m.group
  end
  if from then
    fields[#fields + 1], fields[#fields + 2] = 'from', from
  end
  rcall('XADD', KEY.log, 'MAXLEN', t.log_max, '*', unpack(fields))
end

-- The order at and below which no memory is protected by activity, once a
-- call that remembers k memories ends.
local function newest_after(p, st, k)
  return st.seq + k - p.protect_newest
end

-- What every script that moves memories reads before its first write: the
-- sizes of the hot tier and the cold tier, the hot tier's tokens, and the
-- first memories whose protection ran out by now and by the order the call
-- leaves (one more than a call handles, to see whether more are left; k:
-- how many memories the call remembers). Each read also checks its key's
-- type; text, which these scripts only write (trim_cold), gets a TYPE. The
-- sizes are kept up to date by the helpers that move memories (lift,
-- enforce, trim_cold); work and demote count down this call's budget; dirty
-- holds the groups whose members moved (see regroup).
local function read_tiers(now, p, st, k)
  check_types(KEY.text, KEY.links, KEY.groups, KEY.terms, KEY.entries, KEY.entry_of)
  if p.log_max > 0 then check_types(KEY.log) end
  local newest = newest_after(p, st, k or 0)
  return {
    size = typed_read('ZCARD', KEY.hot) + typed_read('ZCARD', KEY.fresh) +
      typed_read('ZCARD', KEY.wl) + typed_read('ZCARD', KEY.ghot),
    cold = typed_read('ZCARD', KEY.cold),
    tokens = st.tokens,
    expired = ran_out(now, newest, WORK + 1),
    now = now,
    newest = newest,
    -- (protection by activity holds no memory over max_tokens / (2 x the
    -- memories it holds): together they never hold over half the budget)
    held_tokens = (p.max_tokens > 0 and p.protect_newest > 0) and
      p.max_tokens / (2 * p.protect_newest) or math.huge,
    work = WORK,
    demote = DEMOTE,
    log_max = p.log_max,
    p = p, -- (for the scores the log keeps)
    st = st,
    dirty = {},
    members = {},
  }
end

-- The memories protected by activity that cost more than their share of the
-- budget (t.held_tokens) now that the policy changed, added to those whose
-- protection ran out (t.expired) for expire_protection to move (configure: a
-- write keeps the share as it places a memory).
local function over_share(t)
  if t.held_tokens == math.huge then return end
  local ids = rcall('ZRANGEBYSCORE', KEY.prot, '(' .. fmt(ACTIVITY + t.newest), '+inf',
    'LIMIT', 0, WORK)
  if #ids == 0 then return end
  for j, raw in ipairs(rcall('HMGET', KEY.meta, unpack(ids))) do
    if raw and unpack_meta(ids[j], raw).tokens > t.held_tokens then
      t.expired[#t.expired + 1] = ids[j]
    end
  end
end

-- Moves the memories whose protection ran out (t.expired, up to WORK) from
-- fresh to hot (ghot for a memory in a group); one still protected the other
-- way stays, ranked in prot by that. t.expiring: more ran out than this call
-- handles.
local function expire_protection(t)
  local ids = t.expired
  t.expiring = #ids > WORK
  if #ids == 0 then return end
  ids = {unpack(ids, 1, math.min(#ids, WORK))}
  local keys = rcall('ZMSCORE', KEY.fresh, unpack(ids))
  local raws = rcall('HMGET', KEY.meta, unpack(ids))
  local moved, entries, held = {}, {[KEY.hot] = {}, [KEY.ghot] = {}}, {}
  for j, id in ipairs(ids) do
    local m = raws[j] and unpack_meta(id, raws[j])
    if m and protected(m, t) then
      held[#held + 1] = prot_score(m, t)
      held[#held + 1] = id
    elseif keys[j] then
      local index = KEY.hot
      if m and m.group ~= '' then
        index = KEY.ghot
        t.dirty[m.group] = true
      end
      moved[#moved + 1] = id
      local e = entries[index]
      e[#e + 1] = keys[j]
      e[#e + 1] = id
    end
  end
  if #moved > 0 then
    rcall('ZREM', KEY.fresh, unpack(moved))
    for index, e in pairs(entries) do
      if #e > 0 then rcall('ZADD', index, unpack(e)) end
    end
  end
  rcall('ZREM', KEY.prot, unpack(ids))
  if #held > 0 then rcall('ZADD', KEY.prot, unpack(held)) end
  t.work = t.work - #ids
end

-- The first writes of every script that moves memories: the namespace's
-- latest now (see namespace_now), then the protection that ran out.
-- Keys stay small, so ties stay exact however old the namespace (docs/rules.md:
-- where scores and ties are exact): once G has drifted more than REBASE from
-- the offset of an index's keys (D for the decaying indexes and groups,
-- wbase for wl), every key of the index moves back by a whole number and the
-- offset with it, so no score or order changes. Only while the hot tier fits
-- in one call's work.
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
    for _, index in ipairs({KEY.hot, KEY.fresh, KEY.ghot, KEY.groups}) do
      shift_keys(index, by)
    end
    st.decay, st.changed = st.decay + by, true
  end
  by = math.floor(g - st.wbase)
  if math.abs(by) > REBASE then
    shift_keys(KEY.wl, by)
    st.wbase, st.changed = st.wbase + by, true
  end
end

local function start_writes(t, p, st)
  t.cold_max = p.cold_max
  if t.now > st.latest then st.latest, st.changed = t.now, true end
  expire_protection(t)
  rebase(t, p, st)
end

-- Takes a hot memory out of its hot indexes (not meta). Runs after
-- expire_protection, so prot holds it only if it is protected.
local function unplace(m, t)
  if m.wl then
    rcall('ZREM', KEY.wl, m.id)
  elseif rcall('ZREM', evictable_index(m), m.id) == 0 then
    rcall('ZREM', KEY.fresh, m.id)
  end
  -- (whatever protected says now: a memory given more tokens may have lost it)
  rcall('ZREM', KEY.prot, m.id)
  if m.group ~= '' then t.dirty[m.group] = true end
end

-- Puts a hot memory into the index its state calls for; returns its decay
-- key (nil for a whitelisted memory).
local function place(m, t, p, st)
  local held = protected(m, t)
  local key
  if m.wl then
    rcall('ZADD', KEY.wl, fmt(whitelist_key(m, st)), m.id)
  else
    key = decay_key(m, p, st)
    rcall('ZADD', held and KEY.fresh or evictable_index(m), fmt(key), m.id)
  end
  if held then rcall('ZADD', KEY.prot, prot_score(m, t), m.id) end
  if m.group ~= '' then
    -- (its link is written with every placement: a lost one heals here)
    if rcall('ZADD', KEY.links, 0, link_of(m)) == 1 and t.members[m.group] then
      table.insert(t.members[m.group], m.id) -- (a new member: the list read stays true)
    end
    t.dirty[m.group] = true
  end
  return key
end

-- Deletes cold memories for good (meta, text, cold and links entries, and
-- their entries in the lexical index).
local function delete_cold(ids, links, t)
  if #ids == 0 then return end
  if t.log_max > 0 then
    for j, raw in ipairs(rcall('HMGET', KEY.meta, unpack(ids))) do
      if raw then
        local m = unpack_meta(ids[j], raw)
        log_left(t, m, 'cold_max', reported(m, ln_score(m, t.now, t.p, t.st), t.p))
      end
    end
  end
  unindex(ids)
  rcall('HDEL', KEY.meta, unpack(ids))
  rcall('HDEL', KEY.text, unpack(ids))
  rcall('ZREM', KEY.cold, unpack(ids))
  if #links > 0 then rcall('ZREM', KEY.links, unpack(links)) end
end

-- Drops cold memories ids, each with the cold rest of its group (at most
-- WORK + GROUP_MAX in all).
local function drop_grouped(ids, t)
  -- Each one's group, from its metadata (the name after the fixed part);
  -- not read while no memory is in a group.
  local raws = {}
  if #ids > 0 and rcall('ZCARD', KEY.links) > 0 then raws = rcall('HMGET', KEY.meta, unpack(ids)) end
  local drop, links, dropping = {}, {}, {}
  local function add(id, link)
    if dropping[id] then return end
    dropping[id] = true
    drop[#drop + 1] = id
    if link then links[#links + 1] = link end
  end
  for i, id in ipairs(ids) do
    if #drop >= WORK then break end -- (whole groups: at most WORK + GROUP_MAX)
    local group = raws[i] and string.sub(raws[i], META_BYTES + 1) or ''
    if group ~= '' and not dropping[id] then
      local members = members_in(group, t)
      t.members[group] = nil -- (its links go)
      local cold = #members > 0 and rcall('ZMSCORE', KEY.cold, unpack(members)) or {}
      for j, x in ipairs(members) do
        if cold[j] then add(x, group .. '\0' .. x) end
      end
    end
    add(id, group ~= '' and group .. '\0' .. id or nil)
  end
  delete_cold(drop, links, t)
  t.cold = t.cold - #drop
end

-- A call is about to take k memories within cold_max out of the cold tier
-- (recalled, remembered again, forgotten): each would let one past the line
-- in, so the k newest of those past it are dropped first. A memory gone
-- stays gone (rule 8).
local function hold_cold_line(t, k)
  if t.cold <= t.cold_max then return end
  drop_grouped(rcall('ZRANGE', KEY.cold, t.cold_max, t.cold_max + k - 1, 'REV'), t)
end

-- Takes memory m out of wherever it is (its hot indexes, or the cold tier)
-- before it is placed again; m.new marks a memory that is nowhere yet. A
-- memory coming into the hot tier brings its tokens.
local function lift(m, t)
  if m.new then
    t.size = t.size + 1
    t.tokens = t.tokens + m.tokens
  elseif m.cold then
    hold_cold_line(t, 1)
    rcall('ZREM', KEY.cold, m.id)
    t.cold = t.cold - 1
    t.size = t.size + 1
    t.tokens = t.tokens + m.tokens
  else
    unplace(m, t)
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
local function cap_whitelist(p, st, t)
  local excess = math.min(rcall('ZCARD', KEY.wl) - p.whitelist_cap, t.demote)
  if excess <= 0 then return {} end
  t.demote = t.demote - excess
  local ids = rcall('ZRANGE', KEY.wl, 0, excess - 1)
  local demoted = {}
  for _, id in ipairs(ids) do
    local m = read_meta(id)
    if m then
      if t.log_max > 0 then
        log_left(t, m, 'whitelist_cap', reported(m, ln_score(m, t.now, p, st), p))
      end
      unplace(m, t)
      m.wl = false
      write_meta(m)
      place(m, t, p, st)
      demoted[#demoted + 1] = id
    else -- its metadata was lost (docs/operations.md: Lost keys): the entry goes
      rcall('ZREM', KEY.wl, id)
    end
  end
  return demoted
end


-- The cold tier keeps its cold_max most recently evicted memories. The
-- ones beyond are dropped in batches: once there are at least 1 + cold_max
-- / 64 of them (at most TRIM), so a call evicting into a full cold tier of
-- 10,000 drops 32 memories every 32nd call, not one in every call (five
-- commands). Until dropped they are gone for every call (cold_gone), and
-- the tier holds at most TRIM - 1 keys (about 1.5%) more than cold_max.
-- Returns how many trim_cold drops now (before its WORK bound).
local TRIM = 32
local function cold_due(p, n)
  local excess = n - p.cold_max
  if excess < math.min(TRIM, 1 + math.floor(p.cold_max / 64)) then return 0 end
  return excess
end

-- Drops the cold memories due (about WORK per call, each with the cold rest
-- of its group, so fewer than WORK + GROUP_MAX; until then reads treat them
-- as gone: cold_gone).

local function trim_cold(p, t)
  local excess = math.min(cold_due(p, t.cold), WORK)
  if excess <= 0 then return end
  drop_grouped(rcall('ZRANGE', KEY.cold, 0, excess - 1), t)
end


-- Whether cold memory m is beyond cold_max, waiting to be dropped by
-- trim_cold: every call treats it as already gone.
local function cold_gone(m, p)
  if not m.cold then return false end
  local n = typed_read('ZCARD', KEY.cold)
  if n <= p.cold_max then return false end
  if typed_read('ZREVRANK', KEY.cold, m.id) >= p.cold_max then return true end
  -- A group is in one tier: gone when any of its members is (rule 11). Its
  -- members were evicted together, next to each other in the cold tier, so
  -- one past the line is the first one there.
  if m.group == '' then return false end
  local first = rcall('ZRANGE', KEY.cold, p.cold_max, p.cold_max, 'REV')[1]
  local raw = first and rcall('HGET', KEY.meta, first)
  return raw and string.sub(raw, META_BYTES + 1) == m.group or false
end

-- Reads memory id's metadata, or nil if it is unknown or cold_gone.
local function read_live(id, p)
  local m = read_meta(id)
  if m and cold_gone(m, p) then return nil end
  return m
end

-- A memory costing more than the whole token budget is refused: it could
-- never be kept.
local function check_budget(tokens, p)
  if p.max_tokens > 0 and tokens > p.max_tokens then
    fail('OVER_BUDGET', 'a memory of ' .. tokens .. ' tokens is over max_tokens ' ..
      p.max_tokens)
  end
end

-- How far the hot tier is above each budget: count (max_hot) and tokens
-- (max_tokens; 0: no token budget).
local function over_count(p, size)
  return math.max(0, size - p.max_hot)
end

local function over_tokens(p, tokens)
  if p.max_tokens == 0 then return 0 end
  return math.max(0, tokens - p.max_tokens)
end

-- How the namespace stands against its policy: the sizes of its indexes
-- (size: every hot memory), its tokens, over and over_tokens (how far the
-- hot tier is above max_hot and max_tokens) and backlog (the work waiting
-- for later calls: protection run out, evictions still due (at least one
-- while a budget is exceeded and something is evictable; a group counts
-- once), whitelisted above whitelist_cap, cold due to be dropped: cold_due). backlog 0:
-- the policy holds as if it always had.
local function pressure(p, st, now)
  local n = {hot = typed_read('ZCARD', KEY.hot), wl = typed_read('ZCARD', KEY.wl),
    cold = typed_read('ZCARD', KEY.cold), ghot = typed_read('ZCARD', KEY.ghot),
    units = typed_read('ZCARD', KEY.hot) + typed_read('ZCARD', KEY.groups),
    tokens = st.tokens}
  n.size = n.hot + n.ghot + typed_read('ZCARD', KEY.fresh) + n.wl
  n.over = over_count(p, n.size)
  n.over_tokens = over_tokens(p, n.tokens)
  local due = 0
  if n.units > 0 then
    due = math.max(math.min(n.over, n.units), n.over_tokens > 0 and 1 or 0)
  end
  n.backlog = ran_out_count(now, newest_after(p, st, 0)) + due +
    math.max(0, n.wl - p.whitelist_cap) + cold_due(p, n.cold)
  return n
end

-- Drops a cold_gone memory now, for a call that remembers its id anew.
local function drop_cold(m, t)
  delete_cold({m.id}, m.group ~= '' and {link_of(m)} or {}, t)
  t.cold = t.cold - 1
  if m.group ~= '' then t.members[m.group] = nil end
end

-- Eviction ranks units: a memory in no group by its decay key, a group by
-- the highest decay key of its members (docs/rules.md, rule 11). enforce merges
-- the two indexes, lowest first; head reads the lowest entry of one.
local function head(index)
  local e = rcall('ZRANGE', index, 0, 0, 'WITHSCORES')
  if #e == 0 then return nil end
  return {id = e[1], key = tonumber(e[2])}
end

-- Evicts memories to the cold tier: meta flagged cold with its decay ticks
-- folded in (ms: their metadata, keys: their decay keys), cold keys now plus
-- slot / 1024, lowest score first, so memories evicted at the same ms leave
-- the cold tier by score (exact while now < 2^42 ms, the year 2109).
local function to_cold(ms, keys, st, t, evicted)
  local metas, cold = {}, {}
  for i, m in ipairs(ms) do
    if t.log_max > 0 then
      log_left(t, m, t.reason, reported(m, ln_decayed(keys[i], t.now, t.p, st), t.p))
    end
    m.cold = true
    fold_ticks(m, keys[i], st)
    metas[#metas + 1] = m.id
    metas[#metas + 1] = packed_meta(m)
    cold[#cold + 1] = fmt(t.now + t.slot / 1024)
    cold[#cold + 1] = m.id
    t.slot = math.min(1023, t.slot + 1)
    evicted[#evicted + 1] = m.id
    t.tokens = t.tokens - m.tokens
  end
  rcall('HSET', KEY.meta, unpack(metas))
  rcall('ZADD', KEY.cold, unpack(cold))
  if t.texts then -- (the caller asked for them: read before a trim may drop any)
    local ids = {}
    for i, m in ipairs(ms) do ids[i] = m.id end
    for _, text in ipairs(rcall('HMGET', KEY.text, unpack(ids))) do
      t.texts[#t.texts + 1] = text
    end
  end
  t.size = t.size - #ms
  t.cold = t.cold + #ms
end

-- Puts a memory found evictable while protected (a policy change moved its
-- protection) back where it belongs.
-- (index: where it still is; nil when it was popped already.)
local function reprotect(m, index, key, t)
  if index then rcall('ZREM', index, m.id) end
  rcall('ZADD', KEY.fresh, fmt(key), m.id)
  rcall('ZADD', KEY.prot, prot_score(m, t), m.id)
end

-- The hot tier's tokens and highest order, summed from the metadata of
-- every memory in its indexes; nil when they list more than limit entries.
-- The repair of a total that lost track (docs/operations.md: Lost keys): the only
-- reading of the whole tier, done by configure when the state was lost and
-- by a call that meets entries whose metadata was lost (at most
-- RECOUNT entries: past that, the total is summed again when the state is).
local RECOUNT = 1000 -- (~2 µs a memory: the recount stays near 2 ms)

-- Calls visit(m) with the metadata of every member of index that has some,
-- read 1,000 at a time.
local function each_meta(index, visit)
  local ids = rcall('ZRANGE', index, 0, -1)
  for i = 1, #ids, 1000 do
    local chunk = {unpack(ids, i, math.min(i + 999, #ids))}
    for j, raw in ipairs(rcall('HMGET', KEY.meta, unpack(chunk))) do
      if raw then visit(unpack_meta(chunk[j], raw)) end
    end
  end
end

local function hot_totals(limit)
  local indexes = {KEY.hot, KEY.ghot, KEY.fresh, KEY.wl}
  if limit then
    local n = 0
    for _, index in ipairs(indexes) do n = n + rcall('ZCARD', index) end
    if n > limit then return nil end
  end
  local tokens, seq = 0, 0
  for _, index in ipairs(indexes) do
    each_meta(index, function(m) tokens, seq = tokens + m.tokens, math.max(seq, m.n) end)
  end
  return tokens, seq
end

-- Entries whose metadata was lost left the hot tier with tokens nobody
-- knows: the tier's total is summed again (once a call, after its moves).
local function lost_entries(n, t)
  t.size = t.size - n
  if n > 0 and not t.recounted then
    t.recounted = true
    t.tokens = hot_totals(RECOUNT) or t.tokens
  end
end

-- Evicts the memories of hot entries [id, key, id, key, ...], already
-- taken out of hot, lowest first, in one HMGET, HSET and ZADD.
local function evict_popped(entries, st, t, evicted)
  local ids = {}
  for i = 1, #entries, 2 do ids[#ids + 1] = entries[i] end
  t.work = t.work - #ids
  local raws -- (HGET for one: an HMGET's array costs more)
  if #ids == 1 then raws = {rcall('HGET', KEY.meta, ids[1])} else
    raws = rcall('HMGET', KEY.meta, unpack(ids))
  end
  local ms, keys, lost = {}, {}, 0
  for i, id in ipairs(ids) do
    local key = tonumber(entries[2 * i])
    local m = raws[i] and unpack_meta(id, raws[i])
    if not m then -- its metadata was lost (docs/operations.md: Lost keys): the entry went
      lost = lost + 1
    elseif protected(m, t) then
      reprotect(m, nil, key, t)
    else
      ms[#ms + 1], keys[#keys + 1] = m, key
    end
  end
  if #ms > 0 then to_cold(ms, keys, st, t, evicted) end
  lost_entries(lost, t)
end

-- Evicts group e.id whole; false if it is larger than the work left.
local function evict_group(e, st, t, evicted)
  local ids = members_in(e.id, t)
  if #ids > t.work then return false end
  t.work = t.work - math.max(1, #ids)
  rcall('ZREM', KEY.groups, e.id)
  if #ids == 0 then return true end
  local keys = rcall('ZMSCORE', KEY.ghot, unpack(ids))
  local raws = rcall('HMGET', KEY.meta, unpack(ids))
  local ms, lost, gone, held = {}, {}, {}, false
  for i, id in ipairs(ids) do
    local m = raws[i] and unpack_meta(id, raws[i])
    if not m then -- (docs/operations.md: Lost keys)
      lost[#lost + 1], gone[#gone + 1] = e.id .. '\0' .. id, id
    elseif not keys[i] then
      held = true -- not evictable after all: the group stays
    elseif protected(m, t) then
      reprotect(m, KEY.ghot, tonumber(keys[i]), t)
      held = true
    else
      m.key = tonumber(keys[i])
      ms[#ms + 1] = m
    end
  end
  if #lost > 0 then
    rcall('ZREM', KEY.links, unpack(lost))
    rcall('ZREM', KEY.ghot, unpack(gone))
    t.members[e.id] = nil
  end
  if held or #ms == 0 then
    lost_entries(#gone, t)
    return true
  end
  table.sort(ms, function(a, b) return a.key < b.key end)
  local keyed, moved = {}, {}
  for i, m in ipairs(ms) do
    keyed[i] = m.key
    moved[i] = m.id
  end
  rcall('ZREM', KEY.ghot, unpack(moved))
  to_cold(ms, keyed, st, t, evicted)
  lost_entries(#gone, t)
  return true
end

-- While the hot tier is above max_hot or max_tokens, moves the lowest-ranked
-- evictable units (memories, whole groups) to the cold tier until both
-- hold, then evict_batch memories more, as far as the call's budget allows;
-- then trims the cold tier. Whitelisted and protected memories are in
-- neither hot nor groups, so they are never taken, nor is a group with such
-- a member; a memory in hot or ghot whose protection runs past this call's
-- now (a policy change may have moved it there early) goes back to fresh.
-- While protection that ran out waits to be processed (t.expiring) nothing
-- is evicted: the lowest evictable unit may be among those. Returns the
-- evicted ids, over and over_tokens.
local function enforce(p, st, t)
  regroup_dirty(t)
  local function over()
    return t.size > p.max_hot or over_tokens(p, t.tokens) > 0
  end
  local evicted = {}
  if over() and not t.expiring then
    local last = rcall('ZRANGE', KEY.cold, -1, -1, 'WITHSCORES')
    t.slot = 0
    if last[2] and tonumber(last[2]) >= t.now then
      t.slot = math.min(1023, math.floor((tonumber(last[2]) - t.now) * 1024 + 0.5) + 1)
    end
    local extra = p.evict_batch
    -- While there is an evictable group, the lowest memory (a) is read to
    -- compare with the lowest group (b); without one memories are popped.
    -- Each is read when the loop needs it (false: not read yet; nil: none).
    local a, b = false, false
    while t.work > 0 do
      local holding = not over()
      if holding and extra <= 0 then break end
      t.reason = holding and 'evict_batch' or (t.size > p.max_hot and 'max_hot' or 'max_tokens')
      if b == false then b = head(KEY.groups) end
      if b and a == false then a = head(KEY.hot) end
      local before = #evicted
      if b and (not a or b.key < a.key) then
        if not evict_group(b, st, t, evicted) then break end
        b = false
      elseif b then
        rcall('ZREM', KEY.hot, a.id)
        evict_popped({a.id, a.key}, st, t, evicted)
        a = false
      else
        -- Under max_hot alone, as many as it takes at once (the batch's
        -- extra ones once it holds); under a token budget one at a time.
        local n = 1
        if p.max_tokens == 0 then n = holding and extra or t.size - p.max_hot end
        local e = rcall('ZPOPMIN', KEY.hot, math.max(1, math.min(n, t.work)))
        if #e == 0 then break end
        evict_popped(e, st, t, evicted)
      end
      if holding then extra = extra - (#evicted - before) end
    end
  end
  trim_cold(p, t)
  -- A total below 0 was wrong before this call (a state edited by hand): it
  -- is summed again (docs/operations.md: Lost keys).
  if t.tokens < 0 then t.tokens = hot_totals(RECOUNT) or 0 end
  -- The state, with the hot tier's tokens as this call left them, written once.
  if t.tokens ~= st.tokens then st.tokens, st.changed = t.tokens, true end
  save_state(st)
  return evicted, over_count(p, t.size), over_tokens(p, t.tokens)
end

-- The end of every call that (re)placed memory m: its score now (key: its
-- decay key from place, or nil to read it back), then the hot tier brought
-- back to its budgets. Returns the reply [score, [evicted id, ...], demoted,
-- over, over_tokens] that remember, touch, whitelist, demote and recall share.
local function settle(m, key, p, st, t, demoted)
  local ln
  if key and not m.wl then
    ln = ln_decayed(key, t.now, p, st)
  else
    ln = ln_score(m, t.now, p, st)
  end
  local evicted, over, over_tok = enforce(p, st, t)
  return {fmt(reported(m, ln, p)), evicted, demoted, over, over_tok}
end

-- Brings the cold members of memory m's group back with it (m just came
-- into the hot tier from the cold tier, or is new): a group's members are
-- always in one tier. Members beyond cold_max are dropped instead. Returns
-- the ids it moved or dropped.
local function bring_group(m, p, st, t)
  if m.group == '' then return {} end
  local ids = members_in(m.group, t)
  if #ids <= 1 then return {} end -- (m alone)
  local raws = rcall('HMGET', KEY.meta, unpack(ids))
  local moved = {}
  for i, id in ipairs(ids) do
    local x = raws[i] and unpack_meta(id, raws[i])
    if x and x.cold and id ~= m.id then
      if cold_gone(x, p) then
        drop_cold(x, t)
        t.members[m.group] = nil
      else
        lift(x, t)
        refresh(x, t.now, p, st)
        write_meta(x)
        place(x, t, p, st)
      end
      moved[#moved + 1] = id
    end
  end
  return moved
end

-- Puts memory m in group g (its current group, if any, loses it). Before
-- any write: join_check reads g's members (returned, for t.members) and
-- refuses a full group.
local function join_check(m, g)
  if g == '' then return nil end
  local ids = members_of(g)
  if #ids >= GROUP_MAX and not (m and m.group == g) then
    fail('GROUP_FULL', 'group ' .. string.sub(g, 1, 256) .. ' already has ' .. GROUP_MAX ..
      ' members')
  end
  return ids
end

local function join(m, g, t)
  if g == '' or m.group == g then return end
  if m.group ~= '' then
    rcall('ZREM', KEY.links, link_of(m))
    t.dirty[m.group] = true
    t.members[m.group] = nil
  end
  m.group = g -- (place writes its link)
end

-- imps: for a reply of many memories, a table the call keeps of importance
-- -> its text, since most memories share a few importances (fmt is costly).
local function memory_reply(m, score, text, imps)
  local imp = imps and imps[m.imp]
  if not imp then
    imp = fmt(m.imp)
    if imps then imps[m.imp] = imp end
  end
  return {m.id, imp, fmt(score), m.cold and 'cold' or 'hot', m.wl and 1 or 0,
    m.till, m.created, m.la, text or false, m.tokens, m.group}
end
