-- Receipts make a write script safe to run twice. redis-py resends a command
-- after a timeout or a dropped connection (up to 10 times by default), and
-- the first attempt may already have run. A call names its receipt key,
-- KEY.receipt = <prefix>call:<call id>; its reply is stored there for
-- policy.retry_window_s seconds (the server expires it), and the same call
-- again returns the stored reply and writes nothing but the receipt's expiry,
-- renewed: a write, so that a WAIT sent after the repeat (a durable store's)
-- waits for the replicas to reach the first call too. A receipt key with an
-- empty call id keeps no receipt.

-- A receipt keeps at most MAX_RECEIPT bytes: a larger reply (a remember_many
-- of long ids that also evicted many) is not kept; its receipt is an empty
-- string, and the same call again fails with REPLY_NOT_KEPT, writing nothing.
local MAX_RECEIPT = 16384

-- Runs body() once per call id and returns its reply, then keeps the
-- namespace alive (keep_alive, lib/policy.lua). body may fail before its
-- first write; a failed call stores no receipt. A call that runs body makes a
-- new version of the namespace (st.ver, new_version) before it, and the state
-- is written by the end (by body, or here); a repeat makes none.
local function once(p, st, body)
  local function run()
    new_version(st)
    local reply = body()
    save_state(st)
    return reply
  end
  local ttl_ms = math.floor(p.retry_window_s * 1000)
  if ttl_ms < 1 or #KEY.receipt == #PREFIX + #'call:' then
    local reply = run()
    keep_alive(p)
    return reply
  end
  local seen = typed_read('GET', KEY.receipt)
  if seen == '' then
    fail('REPLY_NOT_KEPT', 'this call was applied already; its reply was over ' ..
      MAX_RECEIPT .. ' bytes, so the receipt did not keep it')
  end
  if seen then
    rcall('PEXPIRE', KEY.receipt, ttl_ms)
    return cmsgpack.unpack(seen)
  end
  local reply = run()
  local packed = cmsgpack.pack(reply)
  if #packed > MAX_RECEIPT then packed = '' end
  rcall('SET', KEY.receipt, packed, 'PX', ttl_ms)
  keep_alive(p)
  return reply
end
