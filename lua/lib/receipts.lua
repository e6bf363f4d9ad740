-- Receipts make a write script safe to run twice. redis-py resends a command
-- after a timeout or a dropped connection (up to 10 times by default), and
-- the first attempt may already have run. A call that carries an id (ARG.call)
-- stores its reply for policy.retry_window_s seconds of server time; the same
-- id again returns the stored reply and writes nothing. Needs KEY.calls
-- (hash, id -> packed reply) and KEY.calls_at (zset, id -> expiry ms).
local TRIM = 100 -- expired receipts dropped per call, at most

local function server_ms()
  local t = rcall('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Runs body() once per call id and returns its reply. body may fail before
-- its first write; a failed call stores no receipt.
local function once(call, p, body)
  if call == '' or p.retry_window_s == 0 then return body() end
  local seen = rcall('HGET', KEY.calls, call)
  if seen then return cmsgpack.unpack(seen) end
  local reply = body()
  local now = server_ms()
  local expired = rcall('ZRANGEBYSCORE', KEY.calls_at, '-inf', now, 'LIMIT', 0, TRIM)
  if #expired > 0 then
    rcall('HDEL', KEY.calls, unpack(expired))
    rcall('ZREM', KEY.calls_at, unpack(expired))
  end
  rcall('HSET', KEY.calls, call, cmsgpack.pack(reply))
  rcall('ZADD', KEY.calls_at, now + math.floor(p.retry_window_s * 1000), call)
  return reply
end
