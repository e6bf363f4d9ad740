#!lua flags=no-writes
-- explain: why one memory ranks where it does, read at now. Read-only.
--   score = (importance x boost + jitter) x recency x decay, or score_min instead
--     when the memory is not whitelisted and that product is below it (rule 3:
--     floored). boost: whitelist_boost if whitelisted, else 1. jitter: its
--     tie-breaking offset (rule 4). recency = 0.5 ^ (age / half_life), age on the
--     namespace's clock at its half-life now (memories on the activity clock,
--     seconds on the wall clock) since its last access; decay ticks it took before
--     it was whitelisted or went cold count as age. decay: the product of the
--     decay() rates it took in the hot tier since. A whitelisted memory does not
--     decay: its recency and decay are 1 (its age is told all the same).
--   Protection (rule 5) as the next write judges it: by time (protected_until
--     ahead) or by activity (one of the protect_memories newest: until the
--     namespace's order reaches until_order).
--   Tier: which index holds it: hot (evictable), protected (fresh: protected when
--     it was last placed; its protection may have run out since, which the next
--     write sees), whitelisted, cold; absent for an unknown id or a cold one past
--     cold_max (as get's nil: not an error).
--   Rank (hot tiers only): 1 + the hot memories top ranks above it, wherever it
--     stands (top(rank) ends with it, unless memories tie it exactly past rank:
--     top(k) keeps those of the highest ids). O(log n) per index: a ZCOUNT of the
--     keys above its own, the keys within 1e-12 (relative) of it read and compared
--     one by one (at most 200 per index: more such near ties, from a jitter of 0,
--     leave the rank unknown), and every whitelisted memory read, as top reads
--     them. (A hot entry whose metadata was lost counts; top skips it.)
--   Window: with a budget, the choice of window(budget) itself (lib/window.lua:
--     query_window), and whether it holds the memory. The window takes units (a
--     memory, or a group whole at its first member's turn) in top's order, but
--     memories whose scores tie exactly (a jitter of 0) in the order it reads them:
--     of one index highest key, then highest id, first (ZRANGE REV); of several,
--     the lowest id of what each offers next. left: the budget less the tokens of
--     the units it took before the memory's unit; cost: its tokens, or its group's
--     hot members' (the unit the window takes whole; a cold memory's: its group's
--     cold members'). Why it is not in it: cold; ranked_out (the units before it
--     used the whole budget: left 0); does_not_fit or group_does_not_fit (cost >
--     left); stopped (it would fit, but the window stopped before its turn: 100
--     candidates in a row did not fit, rule 12); tied (more than 200 memories of
--     one index tie its unit's score exactly: its turn among them is not worked
--     out; left counts the units whose scores are above it).
--
-- KEYS[1] policy: hash, the namespace's Policy
-- KEYS[2] state: hash, epoch, decay, seq, g0, x0, latest, wbase and tokens (see configure.lua)
-- KEYS[3] meta: hash, id -> packed metadata
-- KEYS[4] text: hash, id -> text
-- KEYS[5] hot: zset, evictable hot memories in no group, by decay key
-- KEYS[6] fresh: zset, protected non-whitelisted hot memories by decay key
-- KEYS[7] wl: zset, whitelisted memories by whitelist key
-- KEYS[8] ghot: zset, evictable hot memories in a group, by decay key
-- KEYS[9] links: zset, group .. NUL .. id of every memory in a group (lex order)
-- KEYS[10] cold: zset, cold memories by last use ms
--
-- ARGV[1] id: string, 1..1024 bytes
-- ARGV[2] budget: whole number of tokens in [1, 2^53 - 1], or '' for none (no window part)
-- ARGV[3] now: whole ms since the Unix epoch, or '' for the server clock
--
-- Returns: [id, tier, memory, parts, protection, rank, window]; tier 'hot',
--   'protected', 'whitelisted', 'cold' or 'absent' (then the rest are nil); memory
--   as get returns it; parts [importance, boost, jitter, recency, age, half_life,
--   clock, decay, floored] (strings %.17g; clock 'activity' or 'wall'; floored 0|1);
--   protection [protected, by_time, by_activity (0|1), protected_until (ms),
--   until_order (0: not protected by activity), order (its own), order_now (the
--   namespace's: memories remembered so far)], integers; rank an integer, nil for
--   a cold memory or when unknown; window nil without a budget, else [budget,
--   included (0|1), reason ('' when included), left, cost], integers but reason.
-- Errors: ARITY, BAD_KEYS, WRONG_TYPE, BAD_ID, BAD_ARG, BAD_NOW, NO_POLICY
--@include lib/args.lua
--@include lib/policy.lua
--@include lib/memory.lua
--@include lib/window.lua

-- (In a function of its own: a script's body shares Lua's limit of 200 locals
-- in a function with the helpers it includes, and this body needs many.)
local function explain()
  check_call()
  local id = arg_id(ARG.id)
  local budget = false
  if ARG.budget ~= '' then budget = arg_count(ARG.budget, 'budget', 1, 9007199254740991) end
  local now = arg_now(ARG.now)
  local p, st = load_policy()
  now = namespace_now(now, st)

  local m = read_live(id, p)
  if not m then return {id, 'absent', false, false, false, false, false} end

  -- Where it is held, and ln of its unfloored score as get and top compute it.
  local tier, index = 'cold', false
  if m.wl then
    tier = 'whitelisted'
    index = rcall('ZSCORE', KEY.wl, id) and KEY.wl
  elseif not m.cold then
    tier = 'hot'
    if rcall('ZSCORE', KEY.fresh, id) then
      tier, index = 'protected', KEY.fresh
    else
      index = rcall('ZSCORE', evictable_index(m), id) and evictable_index(m)
    end
  end
  local ln = ln_score(m, now, p, st)
  local score = reported(m, ln, p)

  -- The parts: ln = ln(importance x boost + jitter) - age (in G: half-lives x ln 2) +
  -- ln(decay).
  local g = clock(now, p, st) - m.g
  local boost, recency, decay = 1, 1, 1
  if m.wl then
    boost = p.whitelist_boost
  else
    if m.cold then g = math.max(0, g) end -- (as ln_score: a cold memory takes no ticks)
    recency = math.exp(-g)
    decay = math.exp(ln - math.log(m.imp + m.j) + g)
  end
  local age, half_life = g / p.lambda, p.half_life_memories
  if not p.activity then age, half_life = age / 1000, p.half_life_s end
  local floored = not m.wl and math.exp(ln) < p.score_min
  local parts = {fmt(m.imp), fmt(boost), fmt(m.j), fmt(recency), fmt(age), fmt(half_life),
    p.clock, fmt(decay), floored and 1 or 0}

  -- Protection, as protected() in lib/memory.lua judges it.
  local t = {now = now, newest = newest_after(p, st, 0),
    held_tokens = (p.max_tokens > 0 and p.protect_newest > 0) and
      p.max_tokens / (2 * p.protect_newest) or math.huge}
  local held, by_time, by_activity = false, false, false
  if not m.cold then
    held = protected(m, t)
    by_time = m.till > now
    by_activity = m.n > t.newest and m.tokens <= t.held_tokens
  end
  local protection = {held and 1 or 0, by_time and 1 or 0, by_activity and 1 or 0, m.till,
    by_activity and m.n + p.protect_newest or 0, m.n, st.seq}

  -- Whether a ranks above b in top's order: by the score reported, then the
  -- unfloored score, then id. (A memory here: {id, score, ln}.)
  local function higher(a, b)
    if a.score ~= b.score then return a.score > b.score end
    if a.ln ~= b.ln then return a.ln > b.ln end
    return a.id < b.id
  end
  local me = {id = id, score = score, ln = ln}

  -- The whitelisted memories, as top and window read them.
  local whitelisted = {}
  if not m.cold then
    for _, wid in ipairs(rcall('ZRANGE', KEY.wl, 0, -1)) do
      local x = read_meta(wid)
      if x then
        local xln = ln_score(x, now, p, st)
        whitelisted[#whitelisted + 1] = {id = wid, score = math.exp(xln), ln = xln}
      end
    end
  end

  -- The entries of a decaying index whose ln lies within 1e-12 (relative) of ln_c,
  -- lowest first; nil past TIES. ln(y) = key(y) + shift rises with key(y), so an
  -- entry beyond them is above ln_c for certain, one before them below it.
  local TIES = 200
  local DECAYING = {KEY.hot, KEY.ghot, KEY.fresh}
  local shift = st.decay - clock(now, p, st)
  local function bounds(ln_c)
    local key = ln_c - shift
    local w = 1e-12 * (math.abs(key) + math.abs(shift) + math.abs(ln_c))
    return key - w, key + w
  end
  local function near(decaying, ln_c)
    local lo, hi = bounds(ln_c)
    local e = rcall('ZRANGEBYSCORE', decaying, fmt(lo), fmt(hi), 'WITHSCORES', 'LIMIT', 0, TIES + 1)
    if #e > 2 * TIES then return nil end
    local out = {}
    for i = 1, #e, 2 do
      local yln = tonumber(e[i + 1]) + shift -- (as top and window: ln_decayed)
      out[#out + 1] = {id = e[i], score = math.max(math.exp(yln), p.score_min), ln = yln}
    end
    return out
  end

  -- 1 + the hot memories top ranks above it. A decaying one is above it iff its ln
  -- is higher (or equal, with a lower id), whatever the floor, but every one is
  -- when it is whitelisted and below score_min.
  local function rank_of()
    if not index then return false end -- (cold, or its index entry was lost)
    local above = 0
    for _, y in ipairs(whitelisted) do
      if y.id ~= id and higher(y, me) then above = above + 1 end
    end
    for _, decaying in ipairs(DECAYING) do
      if m.wl and score < p.score_min then
        above = above + rcall('ZCARD', decaying)
      else
        local _, hi = bounds(ln)
        above = above + rcall('ZCOUNT', decaying, '(' .. fmt(hi), '+inf')
        local ys = near(decaying, ln)
        if not ys then return false end
        for _, y in ipairs(ys) do
          if y.id ~= id and higher(y, me) then above = above + 1 end
        end
      end
    end
    return above + 1
  end

  -- The window's order is top's, but for memories whose scores tie exactly (a
  -- jitter of 0): the window reads each index highest key first, then highest id
  -- (ZRANGE REV), and takes, of what the indexes offer next, the lowest id. The
  -- place of each memory of c's class (its score and ln exactly) in that order;
  -- nil past TIES in one index.
  local function turns_of(c)
    local streams = {}
    for _, decaying in ipairs(DECAYING) do
      local ys = near(decaying, c.ln)
      if not ys then return nil end
      local s = {}
      for i = #ys, 1, -1 do
        if ys[i].score == c.score and ys[i].ln == c.ln then s[#s + 1] = ys[i].id end
      end
      streams[#streams + 1] = s
    end
    local s = {}
    for _, y in ipairs(whitelisted) do
      if y.score == c.score and y.ln == c.ln then s[#s + 1] = y.id end
    end
    table.sort(s)
    streams[#streams + 1] = s
    local turns, at, n = {}, {1, 1, 1, 1}, 0
    while true do
      local best
      for k, ids in ipairs(streams) do
        if ids[at[k]] and (not best or ids[at[k]] < streams[best][at[best]]) then best = k end
      end
      if not best then return turns end
      n = n + 1
      turns[streams[best][at[best]]] = n
      at[best] = at[best] + 1
    end
  end

  -- Its unit (itself, or its group's members in its tier): the tokens it costs a
  -- window, and its members {id, score, ln} (hot only).
  local function unit_of()
    if m.group == '' then return m.tokens, {me} end
    local ids = members_of(m.group)
    local raws = #ids > 0 and rcall('HMGET', KEY.meta, unpack(ids)) or {}
    local cost, members = 0, {me}
    for i, raw in ipairs(raws) do
      local x = raw and unpack_meta(ids[i], raw)
      if x and x.cold == m.cold then
        cost = cost + x.tokens
        if not x.cold and x.id ~= id then
          local xln = ln_score(x, now, p, st)
          members[#members + 1] = {id = x.id, score = reported(x, xln, p), ln = xln}
        end
      end
    end
    return math.max(cost, m.tokens), members -- (its own link lost: itself at least)
  end

  local function window_of()
    if not budget then return false end
    local cost, members = unit_of()
    if m.cold then return {budget, 0, 'cold', 0, cost} end
    -- Its unit's head: the member the window reaches first (where it takes the group).
    local head = me
    for _, x in ipairs(members) do
      if higher(x, head) then head = x end
    end
    local turns = turns_of(head)
    if turns and not turns[head.id] then turns = nil end -- (its index entry lost)
    if turns then
      for _, x in ipairs(members) do
        local tie = x.score == head.score and x.ln == head.ln
        if tie and (turns[x.id] or math.huge) < turns[head.id] then
          head = x
        end
      end
    end
    -- Whether y comes before the head in the window's order (past TIES: tied).
    local tied = false
    local function before(y)
      if y.score ~= head.score then return y.score > head.score end
      y.ln = y.ln or ln_score(y, now, p, st)
      if y.ln ~= head.ln then return y.ln > head.ln end
      if not turns then
        tied = tied or y.id ~= head.id
        return false
      end
      return (turns[y.id] or math.huge) < turns[head.id]
    end
    -- The tokens of the units before its own: a memory in no group by its turn, a
    -- group by its first member's (any member before its unit's head).
    local taken = query_window(budget, {}, 0, now, p, st, {}, true)
    local included, ahead, group_ahead = false, 0, {}
    for _, y in ipairs(taken) do
      if y.id == id then included = true end
      if y.group ~= '' and not group_ahead[y.group] then group_ahead[y.group] = before(y) end
    end
    for _, y in ipairs(taken) do
      if (y.group == '' and before(y)) or (y.group ~= '' and group_ahead[y.group]) then
        ahead = ahead + y.tokens
      end
    end
    local left = budget - ahead
    local reason = ''
    if not included then
      if tied then
        reason = 'tied'
      elseif left <= 0 then
        reason = 'ranked_out'
      elseif cost > left then
        reason = m.group == '' and 'does_not_fit' or 'group_does_not_fit'
      else
        reason = 'stopped'
      end
    end
    return {budget, included and 1 or 0, reason, left, cost}
  end

  return {id, tier, memory_reply(m, score, rcall('HGET', KEY.text, id)), parts, protection,
    rank_of(), window_of()}
end

return explain()
