-- What a window holds, shared by window.lua (each memory as get returns it)
-- and context.lua (ids and texts): window.lua's header says the rule. Uses
-- lib/memory.lua's helpers and the KEY names both scripts declare.

-- Whether memory a was first remembered before b (then: created, then id).
local function earlier(a, b)
  if a.n ~= b.n then return a.n < b.n end
  if a.created ~= b.created then return a.created < b.created end
  return a.id < b.id
end

-- Memories in the order first remembered.
local function in_time_order(memories)
  table.sort(memories, earlier)
  return memories
end

-- Two lists in the order first remembered, merged into one.
local function merged(a, b)
  local out, i, j = {}, 1, 1
  while i <= #a or j <= #b do
    if j > #b or (i <= #a and earlier(a[i], b[j])) then
      out[#out + 1], i = a[i], i + 1
    else
      out[#out + 1], j = b[j], j + 1
    end
  end
  return out
end

-- Every hot memory a window of budget (math.huge: none) takes at now, in
-- the order first remembered; their tokens; the hot memories in all but
-- those of skip. skip: a set of ids left out (the caller sends them itself;
-- a group's other members may still be taken). slim: no scores are wanted
-- (the memories taken have no score field).
local function choose_window(budget, now, p, st, skip, slim)
  local CHUNK = 100
  -- Without a budget: at most MAX_WINDOW memories of MAX_SEEN candidates. With
  -- one: until MAX_MISSES candidates in a row were not taken.
  local MAX_WINDOW, MAX_SEEN, MAX_MISSES = 400, 1000, 100
  local counted = budget == math.huge

  -- A stream of candidates, highest first: each decaying index read CHUNK at
  -- a time with its metadata, and the whitelisted memories (ranked by their
  -- boosted score, which their keys do not order). A candidate is its
  -- metadata (from unpack_meta; {id = id, lost = true} if lost) with the
  -- score top reports and its unfloored ln added.
  local function candidate(id, raw, ln)
    local c = raw and unpack_meta(id, raw) or {id = id, lost = true}
    local score = math.exp(ln)
    if not c.wl and score < p.score_min then score = p.score_min end
    c.ln, c.score = ln, score
    return c
  end

  local function higher(a, b)
    if a.score ~= b.score then return a.score > b.score end
    if a.ln ~= b.ln then return a.ln > b.ln end
    return a.id < b.id
  end

  -- ln of a decaying index's memory is its key plus this (ln_decayed).
  local shift = st.decay - clock(now, p, st)
  -- The skipped memories in the hot tier: their count and tokens.
  skip = skip or {}
  local skip_ids, skipped, skipped_tokens = {}, 0, 0
  for id in pairs(skip) do skip_ids[#skip_ids + 1] = id end
  if #skip_ids > 0 then
    for i, raw in ipairs(rcall('HMGET', KEY.meta, unpack(skip_ids))) do
      local m = raw and unpack_meta(skip_ids[i], raw)
      if m and not m.cold then skipped, skipped_tokens = skipped + 1, skipped_tokens + m.tokens end
    end
  end

  -- The hot tier fits the budget (the adapters' usual case: max_tokens bounds
  -- it): every hot memory is taken, with no ranking. As many memories as the
  -- budget has tokens at most (each costs one at least), so the work stays
  -- bounded; state's tokens is checked against the memories' own.
  -- The skipped memories count in neither.
  local function everything()
    if budget == math.huge then return nil end
    if st.tokens - skipped_tokens > budget then return nil end
    local size = typed_read('ZCARD', KEY.hot) + typed_read('ZCARD', KEY.fresh) +
      typed_read('ZCARD', KEY.wl) + typed_read('ZCARD', KEY.ghot) - skipped
    if size > budget then return nil end
    local all, sum = {}, 0
    local function add(ids, lns)
      for i = 1, #ids, 1000 do
        local raws = rcall('HMGET', KEY.meta, unpack(ids, i, math.min(i + 999, #ids)))
        for j = 1, #raws do
          local k = i + j - 1
          if raws[j] and not skip[ids[k]] then
            local c
            if slim then
              c = unpack_meta(ids[k], raws[j])
            elseif lns then
              c = candidate(ids[k], raws[j], lns[k])
            else
              local m = unpack_meta(ids[k], raws[j])
              c = candidate(ids[k], raws[j], ln_score(m, now, p, st))
            end
            all[#all + 1], sum = c, sum + c.tokens
          end
        end
      end
    end
    for _, index in ipairs({KEY.hot, KEY.ghot, KEY.fresh}) do
      if slim then
        add(rcall('ZRANGE', index, 0, -1), nil)
      else
        local entries = rcall('ZRANGE', index, 0, -1, 'WITHSCORES')
        local ids, lns = {}, {}
        for i = 1, #entries, 2 do
          ids[#ids + 1], lns[#lns + 1] = entries[i], tonumber(entries[i + 1]) + shift
        end
        add(ids, lns)
      end
    end
    add(rcall('ZRANGE', KEY.wl, 0, -1), nil)
    if sum > budget then return nil end -- (state's tokens was off: rank them)
    return all, sum, size
  end

  local all, sum, hot_size = everything()

  -- Only the hot index holds memories (no group, none protected or
  -- whitelisted: a conversation without tools or instructions) and no score
  -- is wanted: its own order is the rank, so its ids are read without their
  -- keys and only what the choice and the order use of their metadata
  -- decoded (a hot index member is neither cold nor whitelisted).
  local lean = slim and not all and typed_read('ZCARD', KEY.fresh) == 0 and
    typed_read('ZCARD', KEY.ghot) == 0 and typed_read('ZCARD', KEY.wl) == 0

  local streams = {}
  for _, index in ipairs(lean and {KEY.hot} or {KEY.hot, KEY.ghot, KEY.fresh}) do
    streams[#streams + 1] = {index = index, items = {}, at = 1, offset = 0, done = false}
  end
  local wl = {index = false, items = {}, at = 1, done = true}
  local wl_ids = (all or lean) and {} or rcall('ZRANGE', KEY.wl, 0, MAX_SEEN - 1) -- (whitelist_cap <= 200)
  if #wl_ids > 0 then
    for i, raw in ipairs(rcall('HMGET', KEY.meta, unpack(wl_ids))) do
      if raw then
        local m = unpack_meta(wl_ids[i], raw)
        wl.items[#wl.items + 1] = candidate(wl_ids[i], raw, ln_score(m, now, p, st))
      end
    end
    table.sort(wl.items, higher)
  end
  streams[#streams + 1] = wl

  local function peek_lean(s)
    if s.at > #s.items and not s.done then
      local ids = rcall('ZRANGE', s.index, s.offset, s.offset + CHUNK - 1, 'REV')
      s.offset, s.items, s.at = s.offset + CHUNK, {}, 1
      s.done = #ids < CHUNK
      if #ids > 0 then
        for i, raw in ipairs(rcall('HMGET', KEY.meta, unpack(ids))) do
          if not raw then
            s.items[i] = {id = ids[i], lost = true}
          elseif #raw < META_BYTES then
            s.items[i] = unpack_meta(ids[i], raw)
          else
            local created = struct.unpack('<d', raw, 17)
            local tokens, n = struct.unpack('<dd', raw, 50)
            s.items[i] = {id = ids[i], created = created, tokens = tokens, n = n,
              group = string.sub(raw, META_BYTES + 1)}
          end
        end
      end
    end
    return s.items[s.at]
  end

  local function peek(s)
    if lean then return peek_lean(s) end
    if s.at > #s.items and not s.done then
      local entries = rcall('ZRANGE', s.index, s.offset, s.offset + CHUNK - 1, 'REV', 'WITHSCORES')
      s.offset, s.items, s.at = s.offset + CHUNK, {}, 1
      s.done = #entries < 2 * CHUNK
      if #entries > 0 then
        local ids = {}
        for i = 1, #entries, 2 do ids[#ids + 1] = entries[i] end
        local raws = rcall('HMGET', KEY.meta, unpack(ids))
        for i, id in ipairs(ids) do
          s.items[i] = candidate(id, raws[i], tonumber(entries[2 * i]) + shift)
        end
      end
    end
    return s.items[s.at]
  end

  -- The highest candidate of every stream; a stream found empty is dropped.
  local function next_candidate()
    local best, from
    local i = 1
    while i <= #streams do
      local s = streams[i]
      local c = peek(s)
      if c then
        if not best or higher(c, best) then best, from = c, s end
        i = i + 1
      else
        table.remove(streams, i)
      end
    end
    if from then from.at = from.at + 1 end
    return best
  end

  local taken, chosen, decided = {}, {}, {}
  for id in pairs(skip) do chosen[id] = true end -- (never taken)
  local left, seen, misses, total = budget, 0, 0, 0
  if all then taken, total, left = all, sum, 0 end
  local function take(m, score)
    m.score = score
    taken[#taken + 1] = m
    chosen[m.id] = true
    left = left - m.tokens
    total = total + m.tokens
    misses = 0
  end

  while left > 0 and misses < MAX_MISSES do
    if counted and (#taken >= MAX_WINDOW or seen >= MAX_SEEN) then break end
    local m = next_candidate()
    if not m then break end
    seen = seen + 1
    if chosen[m.id] then -- (taken with its group)
    elseif m.lost then misses = misses + 1
    elseif m.group == '' then
      if m.tokens <= left then take(m, m.score) else misses = misses + 1 end
    elseif decided[m.group] then misses = misses + 1 -- (its group did not fit)
    else
      decided[m.group] = true
      misses = misses + 1 -- (0 again if the group is taken)
      -- A group costs at least this member: one over what is left cannot fit.
      if m.tokens <= left then
        local ids = members_of(m.group)
        local members, cost = {}, 0
        if #ids > 0 then
          for i, raw in ipairs(rcall('HMGET', KEY.meta, unpack(ids))) do
            local x = raw and unpack_meta(ids[i], raw)
            if x and not x.cold and not skip[x.id] then
              members[#members + 1] = x
              cost = cost + x.tokens
            end
          end
        end
        if cost <= left and not (counted and #taken + #members > MAX_WINDOW) then
          for _, x in ipairs(members) do
            take(x, x.id == m.id and m.score or reported(x, ln_score(x, now, p, st), p))
          end
        end
      end
    end
  end

  -- In the order first remembered (then by creation, then id). Orders are
  -- distinct but in a namespace from 0.1.0 or whose state was rebuilt: then
  -- a sort of the numbers alone, ~4x cheaper than one with a comparator.
  local by_n, order = {}, {}
  for i, m in ipairs(taken) do
    if by_n[m.n] then order = nil break end
    by_n[m.n], order[i] = m, m.n
  end
  if order then
    table.sort(order)
    for i, n in ipairs(order) do taken[i] = by_n[n] end
  else
    in_time_order(taken)
  end
  local size = hot_size or typed_read('ZCARD', KEY.hot) + typed_read('ZCARD', KEY.fresh) +
    typed_read('ZCARD', KEY.wl) + typed_read('ZCARD', KEY.ghot) - skipped
  return taken, total, size
end

-- The texts of the memories, read 1,000 at a time (unpack takes at most ~8,000
-- values); false where a memory has none.
local function texts_of(memories)
  local texts = {}
  for i = 1, #memories, 1000 do
    local ids = {}
    for k = i, math.min(i + 999, #memories) do ids[#ids + 1] = memories[k].id end
    local chunk = rcall('HMGET', KEY.text, unpack(ids))
    for j = 1, #chunk do texts[i + j - 1] = chunk[j] end
  end
  return texts
end

-- What a query brings into a context (context.lua: its share of the budget):
-- the memories that best match terms, in relevance order, that are live, have
-- text, and are neither taken (the window's) nor skipped, each with the rest of
-- its group (whole, as the window takes groups) when that fits in what is left
-- of budget; at most RECALL_CANDIDATES matches are looked at. Returns them and
-- their tokens.
local RECALL_CANDIDATES = 50
-- A match below this relevance brings nothing: one word that many memories hold
-- ("remember" in "do you remember?") is no sign of what the message is about.
local MIN_RELEVANCE = 2.5
local function recalled_by(terms, budget, p, taken, skip)
  local inside = {}
  for _, m in ipairs(taken) do inside[m.id] = true end
  for id in pairs(skip) do inside[id] = true end
  local found = {}
  local function want(id)
    if inside[id] then return false end
    local m = read_live(id, p)
    if not m then return false end
    found[id] = m
    return true
  end
  local out, used = {}, 0
  for _, hit in ipairs(search_index(terms, RECALL_CANDIDATES, want, MIN_RELEVANCE)) do
    if budget - used < 1 or hit[2] < MIN_RELEVANCE then break end
    local m = found[hit[1]]
    if not inside[m.id] then
      local unit, cost = {m}, m.tokens
      if m.group ~= '' then
        local ids = members_of(m.group)
        local raws = #ids > 0 and rcall('HMGET', KEY.meta, unpack(ids)) or {}
        for i, id in ipairs(ids) do
          if raws[i] and not inside[id] and id ~= m.id then
            local x = unpack_meta(id, raws[i])
            unit[#unit + 1], cost = x, cost + x.tokens
          end
        end
      end
      if used + cost <= budget then
        for _, x in ipairs(unit) do
          out[#out + 1], inside[x.id] = x, true
        end
        used = used + cost
      end
    end
  end
  return out, used
end


-- The query's arguments (context.lua, window.lua): its terms (at most
-- QUERY_TERMS) and its share of the budget, a decimal in [0, 1] ('' = 0).
local function arg_query(terms_arg, share_arg)
  local terms = arg_terms(terms_arg, 'terms')
  if #terms > QUERY_TERMS then
    fail('BAD_TERMS', 'a query holds at most ' .. QUERY_TERMS .. ' terms, got ' .. #terms)
  end
  local share = 0
  if share_arg ~= '' then
    share = decimal(share_arg)
    if share == nil or share < 0 or share > 1 then
      fail('BAD_ARG', 'share must be a number in [0, 1], got ' .. string.sub(share_arg, 1, 64))
    end
  end
  return terms, share
end

-- The window of budget with a query's share: the window takes budget less the
-- share, the query's matches it did not take fill the share (recalled_by), and
-- what they leave goes back to the window; in the order first remembered.
-- Returns the memories, their tokens, the hot memories left out (neither taken
-- nor skipped) and the memories the query brought. No query or no share (or
-- none able to match well enough): the plain window.
local function query_window(budget, terms, share, now, p, st, skip, need_score)
  local share_of = 0
  if #terms > 0 and budget ~= math.huge and p.index == 1 then share_of = math.floor(budget * share) end
  if share_of > 0 and select(2, query_terms_found(terms)) < MIN_RELEVANCE then
    share_of = 0 -- (no memory can match well enough: the plain window, one choice)
  end
  local taken, total, size = choose_window(budget - share_of, now, p, st, skip, not need_score)
  local recalled, left = {}, size - #taken
  if share_of > 0 then
    local used
    recalled, used = recalled_by(terms, share_of, p, taken, skip)
    local hot = 0
    for _, m in ipairs(recalled) do
      if not m.cold then hot = hot + 1 end
    end
    left = left - hot
    if used < share_of and left > 0 then -- (the window takes what the query left)
      local aside = {}
      for id in pairs(skip) do aside[id] = true end
      for _, m in ipairs(recalled) do aside[m.id] = true end
      taken, total, size = choose_window(budget - used, now, p, st, aside, not need_score)
      left = size - #taken
    end
    if need_score then
      for _, m in ipairs(recalled) do m.score = reported(m, ln_score(m, now, p, st), p) end
    end
    taken = merged(taken, in_time_order({unpack(recalled)}))
    total = total + used
  end
  return taken, total, left, recalled
end
