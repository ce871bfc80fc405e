-- cellrate lease: one request over every tier. KEYS: one per tier.
-- ARGV: cost, mode (0: all or nothing; 1: up to cost, at least 1: a lease),
-- refund (cells given back to each tier first), then interval_i, span_i,
-- scale_i per tier, then, when some tier runs on other parameters than its
-- base, each tier's base interval, span and scale (0, 0, 0: none;
-- gcra.lua).
-- Returns {granted, now, ahead_i, wait_i, ...}: cells granted (0 = denied),
-- server us, and per tier TAT - now (sub-ticks) after the call and, when
-- nothing was granted, the wait for the request (for a lease: for one
-- cell); or {-1, now, i} when key i holds no TAT (another type, or a
-- string that is not one), in which case nothing is written.
local now = clock()
local cost = tonumber(ARGV[1])
local upto = ARGV[2] == '1'
local refund = tonumber(ARGV[3])
local n = #KEYS
local ahead, intervals, spans, scales, changed = {}, {}, {}, {}, {}
local tags, bases = {}, {}
for i = 1, n do
  intervals[i] = tonumber(ARGV[1 + 3 * i])
  spans[i] = tonumber(ARGV[2 + 3 * i])
  scales[i] = tonumber(ARGV[3 + 3 * i])
  local o = 3 + 3 * n + 3 * (i - 1)
  if ARGV[o + 1] and ARGV[o + 1] ~= '0' then
    bases[i] = {tonumber(ARGV[o + 1]), tonumber(ARGV[o + 2]), tonumber(ARGV[o + 3])}
    tags[i] = '~' .. num(intervals[i]) .. '/' .. num(spans[i]) .. '/' .. num(scales[i])
  end
  local raw = redis.pcall('GET', KEYS[i])
  if type(raw) == 'table' then return {-1, now, i} end
  local a, moved = 0, false
  if raw then
    a, moved = read(raw, now, scales[i], intervals[i], spans[i], tags[i], bases[i])
    if not a then return {-1, now, i} end
    -- Re-expressed under new parameters: written back as such.
    if moved then changed[i] = true end
  end
  -- Giving cells back: TAT <- max(now, TAT - refund*T).
  if refund > 0 and a > 0 then
    a = a - refund * intervals[i]
    if a < 0 then a = 0 end
    changed[i] = true
  end
  ahead[i] = a
end
local grant = cost
for i = 1, n do
  if upto then
    local fits = room(ahead[i], intervals[i], spans[i])
    if fits < grant then grant = fits end
  else
    local _, over = step(ahead[i], cost, intervals[i], spans[i])
    if over > 0 then grant = 0 end
  end
end
local out = {grant, now}
local want = cost
if upto and cost > 0 then want = 1 end
for i = 1, n do
  local a = ahead[i]
  local wait = 0
  if grant == 0 then
    local _, over = step(a, want, intervals[i], spans[i])
    wait = over
  elseif cost > 0 then
    a = step(a, grant, intervals[i], spans[i])
    changed[i] = true
  end
  if changed[i] then store(KEYS[i], now, a, scales[i], tags[i]) end
  out[2 * i + 1] = a
  out[2 * i + 2] = wait
end
return out
