-- cellrate window check, one tier: n >= 1 requests of a policy whose only
-- tier is a window of `alg`'s algorithm, decided in order at one server
-- time. The tiers script's arguments and reply (tiers.lua) with m = 1:
-- KEYS: one per request. ARGV: 1, kind, three parameters, then one cost per
-- request or a single cost for all. Returns {now, (fits, remaining,
-- reset_after, retry_after) per key ..., bad ...}.
-- One request is decided here, without the batch machinery (no MGET,
-- EXISTS or per-key tables); several go on to one_batch.lua, whose
-- definitions only they pay for.
local now = clock()
if #KEYS == 1 and #ARGV == 6 and ARGV[1] == '1' then
  local key, cost = KEYS[1], tonumber(ARGV[6])
  local p = {tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])}
  local st, moved = nil, false
  if alg.load then
    st, moved = alg.load(key, p, now)
  else
    local raw = redis.pcall('GET', key)
    if type(raw) == 'table' then
      st = false
    elseif raw then
      st, moved = alg.parse(raw, now, p)
      st = st or false
    end
  end
  -- A key holding something else is reported and left as it is.
  if st == false then return {now, 0, 0, 0, 0, 1} end
  local v = alg.view(st, now, p)
  local fit, wait = alg.fits(v, cost, p), 0
  if fit and cost > 0 then
    alg.charge(v, cost, p)
    alg.store(key, v, now, p)
  else
    if not fit then wait = alg.wait(v, cost, p) end
    -- A state re-expressed under new parameters is written back as such.
    if moved then alg.store(key, v, now, p) end
  end
  local x, y = alg.numbers(v, p)
  return {now, fit and 1 or 0, x, y, wait}
end
