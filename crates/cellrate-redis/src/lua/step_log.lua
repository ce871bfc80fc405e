-- The sliding log step (window/log.rs): the expiry times (recorded time
-- + W, microseconds) of the last `limit` admitted cells, oldest first. A
-- cell counts until its expiry, so at most `limit` cells lie in any W
-- consecutive microseconds. With P of them pending at now (expiry > now),
-- the log reads as limit - P expired slots and then the P pending ones:
--   admit <=> cost <= limit - P;  retry_after = slot[cost] - now
-- and an admission records `cost` cells expiring at max(now + W, newest).
-- Stored: 'L<e1>,<e2>,...' (pending expiries only, at most `limit`).
-- Params: p[1] = limit, p[2] = W (us).
local log = {}

function log.parse(raw)
  if raw == 'L' then return {} end
  local list = string.match(raw, '^L([%d,]+)$')
  if not list or string.find(list, ',,', 1, true) or string.sub(list, -1) == ',' then
    return nil
  end
  local ex = {}
  local last = 0
  for x in string.gmatch(list, '[^,]+') do
    local e = field(x)
    if not e or e < last then return nil end
    ex[#ex + 1] = e
    last = e
  end
  return ex
end

-- The pending expiries at now (at most the newest `limit`).
function log.view(st, now, p)
  local v = {now = now}
  if not st then return v end
  local first = #st - p[1] + 1
  if first < 1 then first = 1 end
  for i = first, #st do
    if st[i] > now then v[#v + 1] = st[i] end
  end
  return v
end

function log.fits(v, cost, p) return cost <= p[1] - #v end

function log.wait(v, cost, p)
  -- Slot `cost` (1-based) of the ring is pending entry cost - (limit - P).
  return v[cost - (p[1] - #v)] - v.now
end

function log.numbers(v, p)
  local n = #v
  if n == 0 then return p[1], 0 end
  return p[1] - n, v[n] - v.now
end

function log.charge(v, cost, p)
  local at = v.now + p[2]
  local n = #v
  if n > 0 and v[n] > at then at = v[n] end
  for i = 1, cost do v[n + i] = at end
end

function log.store(key, v, now, p)
  local parts = {}
  for i = 1, #v do parts[i] = num(v[i]) end
  local left = 0
  if #v > 0 then left = v[#v] - now end
  put(key, 'L' .. table.concat(parts, ','), left)
end
