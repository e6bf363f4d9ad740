-- The lexical index: which memories hold which terms, kept by the same calls
-- that write, move and delete memories (docs/rules.md: the index), read by
-- search. The client computes each memory's terms (memevict.terms: the
-- format is in docs/lua-contract.md) and passes them: no script reads text.
--
-- Layout (the namespace's hash tag, as every key):
--   terms     hash  term -> its newest postings: a 4-byte big-endian count of its
--                   full chunks, then up to CHUNK entries; term .. NUL .. k -> its
--                   k-th full chunk (CHUNK entries, oldest first); '' -> the
--                   last entry given out
--   entries   hash  entry -> id, for every memory indexed now: an entry not
--                   here is dead (its memory was deleted or indexed again)
--   entry_of  hash  id -> entry
-- An entry is a 4-byte big-endian number, new for each memory indexed. A
-- posting is never rewritten: a dead entry stays in its term's chunks and
-- search skips it (it checks entries for the candidates it returns).
local CHUNK = 64
local MAX_TERMS = 256
local MAX_TERM_BYTES = 64
local CALL_TERMS = 256 -- terms indexed by one call, all its memories' together (its work)
local MAX_ENTRY = 4294967295 -- then the index is full: memories are no longer indexed
local LUA_ARGS = 4000 -- values passed to one command through unpack (Lua's C stack)

-- A memory's terms: '' (none) or terms joined by single spaces, each 1..64
-- bytes without NUL, at most 256 (a term given twice counts once) and at most
-- 16,640 bytes in all.
local function arg_terms(s, name)
  if s == '' then return {} end
  if #s > MAX_TERMS * (MAX_TERM_BYTES + 1) then
    fail('BAD_TERMS', name .. ' are at most ' .. MAX_TERMS * (MAX_TERM_BYTES + 1) ..
      ' bytes (256 terms of 64 bytes and their spaces), got ' .. #s)
  end
  if string.find(s, '^ ') or string.find(s, ' $') or string.find(s, '  ', 1, true) or
      string.find(s, '\0', 1, true) then
    fail('BAD_TERMS', name .. " must be '' or terms of 1..64 bytes without NUL, joined by " ..
      'single spaces')
  end
  local terms, seen = {}, {}
  for term in string.gmatch(s, '[^ ]+') do
    if #term > MAX_TERM_BYTES then
      fail('BAD_TERMS', 'a term is 1..64 bytes, got ' .. #term .. ': ' .. string.sub(term, 1, 64))
    end
    if not seen[term] then
      seen[term] = true
      terms[#terms + 1] = term
    end
  end
  if #terms > MAX_TERMS then
    fail('BAD_TERMS', name .. ' holds at most ' .. MAX_TERMS .. ' terms, got ' .. #terms)
  end
  return terms
end

-- Fails unless the terms of one call's memories (lists from arg_terms) are at
-- most CALL_TERMS in all: each costs the call 2-5 µs (docs/rules.md: bounded work).
local function check_call_terms(lists)
  local count = 0
  for _, list in ipairs(lists) do count = count + #list end
  if count > CALL_TERMS then
    fail('BAD_TERMS', 'a call indexes at most ' .. CALL_TERMS .. ' terms in all (its ' ..
      "memories' together), got " .. count)
  end
end

local NO_CHUNKS = '\0\0\0\0' -- a new term's postings: no full chunk yet

local function entry_bytes(n)
  return struct.pack('>I4', n)
end

-- list in parts of at most LUA_ARGS values, each small enough for unpack.
local function parts_of(list)
  if #list <= LUA_ARGS then return {list} end
  local parts = {}
  for first = 1, #list, LUA_ARGS do
    parts[#parts + 1] = {unpack(list, first, math.min(#list, first + LUA_ARGS - 1))}
  end
  return parts
end

-- HMGET of the fields of list on hash key, in parts.
local function hmget_all(key, list)
  local out = {}
  for _, part in ipairs(parts_of(list)) do
    for _, x in ipairs(rcall('HMGET', key, unpack(part))) do out[#out + 1] = x end
  end
  return out
end

-- Appends value to map[key]'s list, noting key in keys the first time.
local function add_to(map, keys, key, value)
  local list = map[key]
  if not list then
    list = {}
    map[key] = list
    keys[#keys + 1] = key
  end
  list[#list + 1] = value
end

-- Marks the entries of memories ids dead (deleted, or about to be indexed again).
local function unindex(ids)
  if #ids == 0 then return end
  local entries = hmget_all(KEY.entry_of, ids)
  local dead = {}
  for _, e in ipairs(entries) do
    if e then dead[#dead + 1] = e end
  end
  if #dead == 0 then return end
  for _, part in ipairs(parts_of(dead)) do rcall('HDEL', KEY.entries, unpack(part)) end
  for _, part in ipairs(parts_of(ids)) do rcall('HDEL', KEY.entry_of, unpack(part)) end
end

-- Indexes memories anew: items[i] = {id, terms} (terms from arg_terms; none:
-- the memory is no longer indexed); new: none of the ids is indexed now (no
-- entry to mark dead). Each gets a new entry, appended to the postings of
-- each of its terms; the last entry given out and the postings are read in
-- one HMGET and written in one HSET.
local function reindex(items, new)
  local ids, count = {}, 0
  for i, item in ipairs(items) do
    ids[i] = item[1]
    if #item[2] > 0 then count = count + 1 end
  end
  if not new then unindex(ids) end
  if count == 0 then return end
  local adds, order, pairs_of = {}, {''}, {}
  for _, item in ipairs(items) do
    for _, term in ipairs(item[2]) do add_to(adds, order, term, item) end
  end
  local parts = hmget_all(KEY.terms, order)
  local last = tonumber(parts[1] or '0')
  if last + count > MAX_ENTRY then return end
  local entry_of = {} -- item -> its entry
  for _, item in ipairs(items) do
    if #item[2] > 0 then
      last = last + 1
      local e = entry_bytes(last)
      entry_of[item] = e
      pairs_of[#pairs_of + 1] = e
      pairs_of[#pairs_of + 1] = item[1]
    end
  end
  local of = {}
  for i = 1, #pairs_of, 2 do
    of[#of + 1] = pairs_of[i + 1]
    of[#of + 1] = pairs_of[i]
  end
  for _, part in ipairs(parts_of(pairs_of)) do rcall('HSET', KEY.entries, unpack(part)) end
  for _, part in ipairs(parts_of(of)) do rcall('HSET', KEY.entry_of, unpack(part)) end
  local writes, size = {'', last}, 4 + 4 * CHUNK
  for i = 2, #order do
    local term = order[i]
    local part, add = parts[i] or NO_CHUNKS, adds[term]
    local new_entries
    if #add == 1 then
      new_entries = entry_of[add[1]]
    else
      for j, item in ipairs(add) do add[j] = entry_of[item] end
      new_entries = table.concat(add)
    end
    local value
    if #part + #new_entries <= size then -- (the usual case: one string made)
      value = part .. new_entries
    else -- the oldest CHUNK entries become a full chunk, as many times as needed
      local full = struct.unpack('>I4', part)
      local body = string.sub(part, 5) .. new_entries
      while #body > size - 4 do
        full = full + 1
        writes[#writes + 1] = term .. '\0' .. full
        writes[#writes + 1] = string.sub(body, 1, size - 4)
        body = string.sub(body, size - 3)
      end
      value = struct.pack('>I4', full) .. body
    end
    writes[#writes + 1] = term
    writes[#writes + 1] = value
  end
  for _, part in ipairs(parts_of(writes)) do rcall('HSET', KEY.terms, unpack(part)) end
end

-- Search reads at most READ posting entries (the rarest terms first, each
-- from its newest entries), whatever the namespace holds.
local READ = 4000
local QUERY_TERMS = 32
local WANTED = 64 -- candidates read past k before lower relevances are looked at

-- Adds idf to the relevance of each of entries (newest last), newest first, up
-- to budget of them; a new one is met (in order). Returns order and budget.
local function take(entries, idf, score, met, order, budget)
  local last = math.max(1, #entries - budget + 1)
  for j = #entries, last, -1 do
    local e = entries[j]
    local x = score[e]
    if x then
      score[e] = x + idf
    else
      score[e] = idf
      order = order + 1
      met[order] = e
    end
  end
  return order, budget - (#entries - last + 1)
end

-- The entries of a term's chunk as numbers, oldest first.
local DECODE = {}
local function decode(s, from)
  local n = (#s - from + 1) / 4
  if n <= 0 then return {} end
  local format = DECODE[n]
  if not format then
    format = '>' .. string.rep('I4', n)
    DECODE[n] = format
  end
  local out = {struct.unpack(format, s, from)}
  out[#out] = nil -- (unpack's last value: the position after)
  return out
end

-- The best-matching live memories for query terms: up to k {id, relevance}
-- pairs, best first (ties: the newer indexed first), with want(id) true; none
-- when no memory could reach the relevance floor (nil: any).
-- Relevance is BM25 with every term counted once per memory and no length
-- normalisation (b = 0, which measured best on real chats):
-- the sum over the query's terms that the memory holds of
-- ln(1 + (N - n + 0.5) / (n + 0.5)), N the memories indexed and n those
-- holding the term (dead entries counted too: read, not kept).
-- The query's terms the index holds, rarest first, each with its postings'
-- newest chunk, its count n and its idf; and the relevance of a memory holding
-- all of them (the most any can have).
local function query_terms_found(terms)
  if #terms == 0 then return {}, 0 end
  local parts = rcall('HMGET', KEY.terms, unpack(terms))
  local found = {}
  for i, term in ipairs(terms) do
    local part = parts[i]
    if part then
      local full = struct.unpack('>I4', part)
      found[#found + 1] = {term = term, part = part, full = full,
        n = full * CHUNK + (#part - 4) / 4}
    end
  end
  if #found == 0 then return found, 0 end
  table.sort(found, function(a, b) return a.n < b.n end)
  local total, best = rcall('HLEN', KEY.entries), 0
  for _, f in ipairs(found) do
    f.idf = math.log(1 + (math.max(total - f.n, 0) + 0.5) / (f.n + 0.5))
    best = best + f.idf
  end
  return found, best
end

local function search_index(terms, k, want, floor)
  if #terms == 0 or k <= 0 then return {} end
  local found, best = query_terms_found(terms)
  if #found == 0 or (floor and best < floor) then return {} end -- (nothing read)
  local score, met, order, budget = {}, {}, 0, READ
  for _, f in ipairs(found) do
    if budget <= 0 then break end
    local idf = f.idf
    order, budget = take(decode(f.part, 5), idf, score, met, order, budget)
    local chunk = f.full
    while budget > 0 and chunk > 0 do
      local names = {}
      for c = chunk, math.max(1, chunk - math.ceil(budget / CHUNK) + 1), -1 do
        names[#names + 1] = f.term .. '\0' .. c
      end
      for _, s in ipairs(rcall('HMGET', KEY.terms, unpack(names))) do
        if s then order, budget = take(decode(s, 1), idf, score, met, order, budget) end
      end
      chunk = chunk - #names
    end
  end
  -- The best candidates, down to the relevance at which WANTED more than k are
  -- reached (room for dead entries and the tier): few distinct relevances (sums
  -- of the terms' idf), each a bucket in the order met (newest first in the
  -- rarest term); lower ones only if those run out.
  local count, values = {}, {}
  for j = 1, order do
    local x = score[met[j]]
    local c = count[x]
    if c then count[x] = c + 1 else count[x], values[#values + 1] = 1, x end
  end
  table.sort(values, function(a, b) return a > b end)
  local out, done = {}, 0
  while done < #values do
    local floor, have, first = values[#values], 0, done + 1
    for i = first, #values do
      have = have + count[values[i]]
      if have >= k + WANTED then
        floor = values[i]
        break
      end
    end
    local buckets, top = {}, first == 1 and math.huge or values[first - 1]
    for j = 1, order do
      local e = met[j]
      local x = score[e]
      if x >= floor and x < top then
        local b = buckets[x]
        if b then b[#b + 1] = e else buckets[x] = {e} end
      end
    end
    for i = first, #values do
      local x = values[i]
      if x < floor then break end
      done = i
      local b = buckets[x]
      for at = 1, #b, 64 do
        local batch = {}
        for j = at, math.min(#b, at + 63) do batch[#batch + 1] = entry_bytes(b[j]) end
        local ids = rcall('HMGET', KEY.entries, unpack(batch))
        for j = 1, #batch do
          local id = ids[j]
          if id and want(id) then
            out[#out + 1] = {id, x}
            if #out >= k then return out end
          end
        end
      end
    end
  end
  return out
end
