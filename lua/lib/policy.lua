-- The namespace's Policy (KEY.policy) and its clock state (KEY.state).
-- Both hashes are written by configure; every other script only reads them.

-- Policy fields in ARGV order for configure and reply order everywhere.
-- kind 'int' fields are whole numbers; 'num' fields are decimals; both lie
-- in [lo, hi], ranges in which every score, key and time stays finite and
-- exact (docs/rules.md: Ranges). 'word' fields are one of the listed words.
local MAX_INT = 9007199254740992 -- 2^53
local POLICY = {
  {'max_hot', 'int', 1, MAX_INT},
  {'evict_batch', 'int', 0, 100},
  {'clock', 'word', {'activity', 'wall'}},
  {'half_life_memories', 'num', 0.001, 1e12},
  {'half_life_s', 'num', 0.001, 1e12},
  {'whitelist_boost', 'num', 1, 1e6},
  {'whitelist_cap', 'int', 0, 200},
  {'protect_s', 'num', 0, 1e9},
  {'score_min', 'num', 0, 1e12},
  {'jitter', 'num', 0, 1},
  {'cold_max', 'int', 0, MAX_INT},
  {'retry_window_s', 'num', 0, 86400},
  -- (added after 0.1.0: a policy stored without them reads the value given)
  {'max_tokens', 'int', 0, MAX_INT, '0'},
  {'idle_ttl_s', 'num', 0, 1e9, '0'},
  {'index', 'int', 0, 1, '0'},
  {'protect_memories', 'int', 0, 1000000, '0'},
  {'log_max', 'int', 0, 100000, '0'},
}
-- How many fields a packed copy holds, by its length (see unpacked_policy): a
-- memevict before 'index' packed 14 fields, with its revision after them or
-- none; one before 'protect_memories' 15, one before 'log_max' 16, with its
-- revision.
local PACKED_FIELDS = {[14] = 14, [15] = 14, [16] = 15, [17] = 16}

-- Parses one policy value; nil and a reason when it is out of range.
local function policy_value(field, s)
  local name, kind, lo, hi = field[1], field[2], field[3], field[4]
  if kind == 'word' then
    for _, word in ipairs(lo) do
      if s == word then return s end
    end
    return nil, name .. ' must be one of ' .. table.concat(lo, ', ') .. ', got ' ..
      string.sub(s, 1, 64)
  end
  local x
  if kind == 'int' then x = whole(s, lo, hi) else x = decimal(s) end
  if x == nil or x < lo or x > hi then
    return nil, name .. ' must be a ' .. (kind == 'int' and 'whole number' or 'number') ..
      ' in [' .. fmt(lo) .. ', ' .. fmt(hi) .. '], got ' .. string.sub(s, 1, 64)
  end
  return x
end

local function policy_names()
  local names = {}
  for i, f in ipairs(POLICY) do names[i] = f[1] end
  return names
end

-- The stored policy is also kept packed, in the field 'packed' of the same
-- hash: the values in POLICY order (a word as its position in its list) as
-- one MessagePack array, so a script reads it with one HGET and one
-- cmsgpack.unpack instead of an HMGET of every field and a tonumber each.
-- (MessagePack keeps a whole number in 1..9 bytes and any other exactly in
-- 5 or 9, so a usual policy packs in under 64 bytes and the hash stays a
-- compact listpack.) configure writes both in one HSET; the fields are what
-- the Python package, the CLI and people read. A hand edit of a field
-- reaches the scripts when configure next runs (every store runs it when it
-- opens): configure checks the fields as it checks a policy given to it and
-- packs them again (policy_repack in configure.lua).

-- The policy's values as numbers, from its fields as strings in POLICY
-- order (an HMGET of policy_names(); a field added since the policy was
-- stored reads nil, and takes its default).
local function policy_numbers(values)
  local numbers = {}
  for i, f in ipairs(POLICY) do
    local v = values[i] or f[5]
    if f[2] == 'word' then
      for k, word in ipairs(f[3]) do
        if word == v then numbers[i] = k end
      end
    else
      numbers[i] = tonumber(v)
    end
  end
  return numbers
end

-- The recency clock G measures age in half-lives times ln 2, so recency =
-- exp(-(G(now) - G(last access))). It runs on one of two clocks:
--   wall      G advances with the server's time: halves every half_life_s
--   activity  G advances with every memory remembered in the namespace (the
--             seq counter): halves every half_life_memories, and stands
--             still while nothing is remembered
-- G is piecewise linear: configure stores its value g0 where the clock or
-- half-life last changed, at position x0 (ms for wall, seq for activity).
-- The policy from policy_numbers, with lambda, G per unit of position (a
-- memory remembered, or a ms).
local function policy_of(numbers)
  local p = {}
  for i, f in ipairs(POLICY) do
    p[f[1]] = f[2] == 'word' and f[3][numbers[i]] or numbers[i]
  end
  p.activity = p.clock == 'activity'
  -- (protection by activity holds at most a tenth of max_hot: lib/memory.lua)
  p.protect_newest = math.min(p.protect_memories, math.floor(p.max_hot / 10))
  -- (its revision, as the seen a write carries spells it: see load_policy)
  p.revision = fmt(numbers[#POLICY + 1] or 0)
  if p.activity then
    p.lambda = math.log(2) / p.half_life_memories
  else
    p.lambda = math.log(2) / p.half_life_s / 1000
  end
  return p
end

local function parse_policy(raw)
  return policy_of(policy_numbers(raw))
end

-- The packed copy also carries the policy's revision, after the fields (see
-- seen_parts below): a write reads it with the policy, at no cost of its own.
local function pack_policy(values, revision)
  local numbers = policy_numbers(values)
  numbers[#POLICY + 1] = revision
  return cmsgpack.pack(numbers)
end

-- The namespace's state (see configure.lua): its clock (epoch, decay, g0,
-- x0, latest, wbase), the seq counter, the hot tier's tokens and the
-- namespace's version (ver), packed as nine doubles in the field 'packed' of
-- the state hash (72 bytes: the hash stays a compact listpack). A call reads
-- it with one HGET, changes it in st as it goes (st.changed) and writes it
-- with one HSET (save_state) at the end of its writes. memevict 0.1.0 kept
-- each as a field of its own: such a state is read from its fields and
-- written packed, the fields removed. A state packed before the version
-- (eight doubles, 64 bytes: memevict before issue 41) reads as version 0.
local STATE = {'epoch', 'decay', 'seq', 'g0', 'x0', 'latest', 'wbase', 'tokens', 'ver'}
local PACKED_STATE = '<ddddddddd'

-- Whether x is a finite number in [lo, hi] (false for NaN).
local function within(x, lo, hi)
  return x >= lo and x <= hi
end

-- A packed state of another length, or with a value no call writes (a byte
-- flipped by hand: not finite, a negative count, a time outside 0 .. 9999),
-- reads as none: the call fails NO_POLICY before any write and configure
-- rebuilds it.
local function read_state()
  local packed = typed_read('HGET', KEY.state, 'packed')
  if packed and #packed ~= 72 and #packed ~= 64 then return nil end
  if packed then
    local epoch, decay, seq, g0, x0, latest, wbase, tokens, ver
    if #packed == 72 then
      epoch, decay, seq, g0, x0, latest, wbase, tokens, ver = struct.unpack(PACKED_STATE, packed)
    else
      epoch, decay, seq, g0, x0, latest, wbase, tokens = struct.unpack('<dddddddd', packed)
      ver = 0
    end
    local big = 2 ^ 53
    if not (within(epoch, 0, 253402300799999) and within(latest, 0, 253402300799999)
        and within(seq, 0, big) and within(tokens, 0, big) and within(decay, -big, big)
        and within(g0, -big, big) and within(x0, -big, 253402300799999)
        and within(wbase, -big, big) and within(ver, 0, big)) then
      return nil
    end
    return {epoch = epoch, decay = decay, seq = seq, g0 = g0, x0 = x0, latest = latest,
      wbase = wbase, tokens = tokens, ver = ver, changed = false}
  end
  local v = rcall('HMGET', KEY.state, unpack(STATE))
  if v[1] == false then return nil end
  return {epoch = tonumber(v[1]), decay = tonumber(v[2]), seq = tonumber(v[3]),
    g0 = tonumber(v[4]), x0 = tonumber(v[5]), latest = tonumber(v[6]) or 0,
    wbase = tonumber(v[7]) or 0, tokens = tonumber(v[8]) or 0, ver = tonumber(v[9]) or 0,
    changed = true, fields = true}
end

-- Writes st if this call changed it.
local function save_state(st)
  if not st.changed then return end
  rcall('HSET', KEY.state, 'packed', struct.pack(PACKED_STATE, st.epoch, st.decay, st.seq,
    st.g0, st.x0, st.latest, st.wbase, st.tokens, st.ver))
  if st.fields then
    rcall('HDEL', KEY.state, unpack(STATE))
    st.fields = nil
  end
  st.changed = false
end

-- A new version of the namespace: every call that writes makes one (once, in
-- lib/receipts.lua; configure where it writes), so that a client holding what it
-- read at one version knows it still holds while the version is the same.
local function new_version(st)
  st.ver, st.changed = st.ver + 1, true
end

-- The last packed policy parsed, and its policy: in the functions library
-- these locals outlive a call (its helpers are defined once, when it loads),
-- so a namespace whose policy did not change skips cmsgpack.unpack and
-- policy_of (A/B in benchmarks/RESULTS.md); in a script they start empty
-- every call. The policy depends on the packed bytes alone, and no script
-- changes a policy table after policy_of: it is shared, read-only.
local last_packed, last_policy

-- Whether numbers (a packed policy, unpacked) is one configure could have
-- packed: every value a number in its field's range (a word: its position
-- in its list). A damaged one is never used (a byte flipped by hand).
local function valid_numbers(numbers)
  if type(numbers) ~= 'table' or (#numbers ~= #POLICY and #numbers ~= #POLICY + 1) then
    return false
  end
  for i, f in ipairs(POLICY) do
    local x, lo, hi = numbers[i], f[3], f[4]
    if f[2] == 'word' then lo, hi = 1, #f[3] end
    if type(x) ~= 'number' or not (x >= lo and x <= hi) then return false end
    if f[2] ~= 'num' and x ~= math.floor(x) then return false end
  end
  local revision = numbers[#POLICY + 1] -- (none in a copy an earlier memevict packed)
  return revision == nil or (type(revision) == 'number' and revision >= 0 and
    revision <= MAX_INT and revision == math.floor(revision))
end

-- The policy of a packed copy, or nil if it is damaged (valid_numbers). A copy
-- an earlier memevict packed holds fewer fields (PACKED_FIELDS): the fields
-- added since read their defaults, and its revision moves after them.
local function unpacked_policy(packed)
  local ok, numbers = pcall(cmsgpack.unpack, packed)
  if not ok or type(numbers) ~= 'table' then return nil end
  local have = PACKED_FIELDS[#numbers]
  if have then
    local revision = numbers[have + 1]
    for i = have + 1, #POLICY do numbers[i] = tonumber(POLICY[i][5]) end
    numbers[#POLICY + 1] = revision
  end
  if not valid_numbers(numbers) then return nil end
  return policy_of(numbers)
end

-- The namespace as a caller last saw it (issue 38): '<incarnation>:<revision>'.
-- Its incarnation is the state's epoch, drawn (to the microsecond) when the
-- namespace is made and kept for as long as any key of it is: a namespace made
-- again after its keys were lost, or after a drop, is another incarnation. Its
-- revision is the policy's, which every change of the policy counts, kept in the
-- packed copy. The policy hash also keeps both as the fields 'incarnation' and
-- 'revision' (configure keeps them in step, and tells them in its reply when
-- asked). '' checks nothing.
local MAX_SEEN_BYTES = 64

local function seen_parts(s)
  if s == '' then return nil end
  local incarnation, revision = string.match(s, '^([^:]+):(%d+)$')
  local x = incarnation and decimal(incarnation)
  if #s > MAX_SEEN_BYTES or not x or #revision > 20 then
    fail('BAD_ARG', "seen must be '' or <incarnation>:<revision>, got " .. string.sub(s, 1, 64))
  end
  return x, revision
end

-- What NAMESPACE_CHANGED says first: the namespace as it is now ('-' when it has
-- no incarnation), so that the caller need not ask again.
local function changed(incarnation, revision, seen)
  local there = incarnation and (fmt(incarnation) .. ':' .. (revision or '0')) or '-'
  fail('NAMESPACE_CHANGED', there .. ' is not the namespace this call was made for (' ..
    string.sub(seen, 1, 64) .. '): made again since, or its policy changed; nothing was written')
end

-- A write's seen against the namespace (st, p): the usual case, the one it is,
-- costs a find, two subs, a tonumber and two compares; any other value is
-- checked whole (BAD_ARG) and refused (NAMESPACE_CHANGED), before any write.
local function check_seen(seen, st, p)
  local at = string.find(seen, ':', 1, true)
  if at and string.sub(seen, at + 1) == p.revision and
      tonumber(string.sub(seen, 1, at - 1)) == st.epoch then
    return
  end
  seen_parts(seen)
  changed(st.epoch, p.revision, seen)
end

-- The policy and the state; with ``seen`` (a write's ARG.seen), first checks that
-- the namespace is the one the caller saw (check_seen).
local function load_policy(seen)
  local packed = typed_read('HGET', KEY.policy, 'packed')
  local p
  if packed and packed == last_packed then
    p = last_policy
  elseif packed then
    p = unpacked_policy(packed)
    if not p then
      fail('NO_POLICY', "the namespace's packed policy is damaged; configure (any " ..
        'MemoryStore opening the namespace) packs it again from the fields')
    end
    last_packed, last_policy = packed, p
  else -- a policy stored before the packed field (memevict 0.1.0), or none
    local names = policy_names()
    names[#POLICY + 1] = 'revision'
    local raw = rcall('HMGET', KEY.policy, unpack(names))
    if raw[1] == false then
      fail('NO_POLICY', 'namespace has no policy; run configure first')
    end
    local numbers = policy_numbers(raw)
    numbers[#POLICY + 1] = tonumber(raw[#POLICY + 1])
    if not valid_numbers(numbers) then
      fail('NO_POLICY', "the namespace's policy fields are damaged; fix them by hand or " ..
        'set the policy again (memevict policy ...)')
    end
    p = policy_of(numbers)
  end
  local st = read_state()
  if not st then
    fail('NO_POLICY', 'namespace lost its state key; configure (any MemoryStore) rebuilds it')
  end
  if seen and seen ~= '' then check_seen(seen, st, p) end
  return p, st
end

-- The namespace's time never runs backwards: a now earlier than the latest
-- now a write used (a worker whose clock is behind, or an explicit now from
-- the past) is read as that latest now. So no call moves a memory's last
-- access, protection or eviction back, and every memory's G is at most G(now):
-- scores, top order and eviction order agree at every now.
local function namespace_now(now, st)
  return math.max(now, st.latest)
end

-- idle_ttl_s > 0: a namespace nobody writes to for that long expires with
-- all its keys. Every write script lists every key of the namespace and,
-- after its writes, sets each one's expiry to idle_ttl_s from the server's
-- time (ceil to whole ms: never earlier); a receipt keeps its own. Keys a
-- call creates get it in the same call, so all of a namespace's keys expire
-- at once. idle_ttl_s 0: configure takes back an expiry set before.
local function keep_alive(p)
  if p.idle_ttl_s <= 0 then return end
  local ms = math.ceil(p.idle_ttl_s * 1000)
  for i = 1, NKEYS do
    if KEY_ROLE[i] ~= 'receipt' then rcall('PEXPIRE', KEYS[i], ms) end
  end
end

local function never_expire()
  for i = 1, NKEYS do
    if KEY_ROLE[i] ~= 'receipt' then rcall('PERSIST', KEYS[i]) end
  end
end
