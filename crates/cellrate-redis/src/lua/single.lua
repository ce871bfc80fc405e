-- cellrate single check: one request of a one-tier policy.
-- KEYS: the key. ARGV: cost, interval, span, scale, then the base's
-- interval, span and scale when the tier runs on others (gcra.lua).
-- Returns {now, v}: v = TAT - now (sub-ticks) after the request if admitted
-- (or a peek that fits), else -1 - (TAT - now) before it; or {now, 0, 1}
-- when the key holds no TAT (another type, or a value that is not one):
-- nothing is written and the key is left as it is. A TAT written under
-- other parameters is re-expressed under these and written back, even by a
-- denial or a peek.
local now = clock()
local cost = tonumber(ARGV[1])
local interval = tonumber(ARGV[2])
local span = tonumber(ARGV[3])
local scale = tonumber(ARGV[4])
local tag, base = nil, nil
if ARGV[5] then
  tag = '~' .. ARGV[2] .. '/' .. ARGV[3] .. '/' .. ARGV[4]
  base = {tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])}
end
local raw = redis.pcall('GET', KEYS[1])
local ahead, moved = 0, false
if type(raw) == 'table' then return {now, 0, 1} end
if raw then
  ahead, moved = read(raw, now, scale, interval, span, tag, base)
  if not ahead then return {now, 0, 1} end
end
local need, over = step(ahead, cost, interval, span)
if over > 0 or cost == 0 then
  -- A TAT re-expressed under new parameters is written as such.
  if moved then store(KEYS[1], now, ahead, scale, tag) end
  if over > 0 then return {now, -1 - ahead} end
  return {now, need}
end
store(KEYS[1], now, need, scale, tag)
return {now, need}
