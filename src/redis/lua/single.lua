-- cellrate single check: one request of a one-tier policy.
-- KEYS: the key. ARGV: cost, interval, span, scale.
-- Returns {now, v}: v = TAT - now (sub-ticks) after the request if admitted
-- (or a peek that fits), else -1 - (TAT - now) before it; or {now, 0, 1}
-- when the key holds no TAT (another type, or a value that is not one):
-- nothing is written and the key is left as it is.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local cost = tonumber(ARGV[1])
local interval = tonumber(ARGV[2])
local span = tonumber(ARGV[3])
local scale = tonumber(ARGV[4])
local raw = redis.pcall('GET', KEYS[1])
local ahead = 0
if type(raw) == 'table' then return {now, 0, 1} end
if raw then
  local us, f = tonumber(raw), 0
  if not (us and us >= 0 and us < TWO53 and us == math.floor(us)) then
    us, f = parse(raw, scale)
    if not us then return {now, 0, 1} end
  end
  ahead = ahead_of(us, f, now, scale)
end
local need = ahead + cost * interval
if need > span then return {now, -1 - ahead} end
if cost > 0 then
  if scale == 1 then
    redis.call('SET', KEYS[1], int(now + need), 'PX', int(math.floor(need / 1000) + 1))
  else
    store(KEYS[1], now, need, scale)
  end
end
return {now, need}
