-- cellrate single check: one request of a one-tier policy.
-- KEYS: the key. ARGV: cost, interval, span, scale.
-- Returns {now, v}: v = TAT - now (sub-ticks) after the request if admitted
-- (or a peek that fits), else -1 - (TAT - now) before it; or {now, 0, 1}
-- when the key holds no TAT (another type, or a value that is not one):
-- nothing is written and the key is left as it is.
local now = clock()
local cost = tonumber(ARGV[1])
local interval = tonumber(ARGV[2])
local span = tonumber(ARGV[3])
local scale = tonumber(ARGV[4])
local raw = redis.pcall('GET', KEYS[1])
local ahead = 0
if type(raw) == 'table' then return {now, 0, 1} end
if raw then
  ahead = read(raw, now, scale)
  if not ahead then return {now, 0, 1} end
end
local need, over = step(ahead, cost, interval, span)
if over > 0 then return {now, -1 - ahead} end
if cost > 0 then store(KEYS[1], now, need, scale) end
return {now, need}
