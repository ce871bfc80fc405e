-- cellrate tiers check: n >= 1 requests of one policy of m tiers, each
-- tier with its own algorithm, decided in order at one server time; a
-- request is admitted iff every tier admits it, and then charged on every
-- tier (a refusal by one tier charges none).
-- KEYS: m per request (request r's tier i is key (r - 1)*m + i).
-- ARGV: m, then per tier its kind and three parameters:
--   0 GCRA:            interval, span, scale   (common.lua)
--   1 fixed window:    limit, W, 0             (step_fixed.lua)
--   2 sliding window:  limit, W, 0             (step_sliding.lua)
--   3 bucketed window: limit, b, N             (step_bucketed.lua)
--   4 sliding log:     limit, W, 0             (step_log.lua)
-- then one cost per request, or a single cost for all of them.
-- Returns {now, (fits, x, y, z) per key ..., bad ...}: per key whether the
-- request fits that tier (1 or 0) and
--   GCRA:    x = TAT - now (sub-ticks), after the request if it was
--            admitted, else before it; y = z = 0;
--   windows: x = remaining, y = reset_after (us), after the request if it
--            was admitted, else before it; z = retry_after (us) when the
--            request does not fit that tier, else 0;
-- then the index of every key that holds nothing this tier can read. A
-- request with such a key is not decided (its values are 0) and charges
-- nothing; such a key is never written.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local m = tonumber(ARGV[1])
local kinds, params = {}, {}
local steps = {[1] = fixed, [2] = sliding, [3] = bucketed, [4] = log}
for i = 1, m do
  local o = 4 * i - 2
  kinds[i] = tonumber(ARGV[o])
  params[i] = {tonumber(ARGV[o + 1]), tonumber(ARGV[o + 2]), tonumber(ARGV[o + 3])}
end
local first = 4 * m + 1
local n = #KEYS / m
local uniform = #ARGV == first + 1
if m < 1 or n ~= math.floor(n) or (not uniform and #ARGV - first ~= n) then
  return redis.error_reply('cellrate: bad tiers arguments')
end
local cost = tonumber(ARGV[first + 1])
-- One request of a one-tier window policy (the common call): the same
-- decision and reply without the batch machinery (no MGET, EXISTS or
-- per-key tables). A key of another type, or a value this step cannot
-- read, is reported bad and left as it is.
if m == 1 and #KEYS == 1 and kinds[1] ~= 0 then
  local key, p, s = KEYS[1], params[1], steps[kinds[1]]
  local raw = redis.pcall('GET', key)
  if type(raw) == 'table' then return {now, 0, 0, 0, 0, 1} end
  local st = nil
  if raw then
    st = s.parse(raw)
    if not st then return {now, 0, 0, 0, 0, 1} end
  end
  local v = s.view(st, now, p)
  local fit, wait = s.fits(v, cost, p), 0
  if fit then
    if cost > 0 then
      s.charge(v, cost, p)
      s.store(key, v, now, p)
    end
  else
    wait = s.wait(v, cost, p)
  end
  local x, y = s.numbers(v, p)
  return {now, fit and 1 or 0, x, y, wait}
end
local raws, foreign = read_keys(KEYS)
-- Per key its state once read (GCRA: TAT - now in sub-ticks; a window: its
-- step's state), or bad. Every request is decided at the same now, so a
-- key's state after a request is what the next request of that key reads.
local state, bad, loaded = {}, {}, {}
local out, dirty, order, tier_of, bads = {now}, {}, {}, {}, {}
local fits, views = {}, {}
for r = 1, n do
  if not uniform then cost = tonumber(ARGV[first + r]) end
  local k0 = (r - 1) * m
  local usable = true
  for i = 1, m do
    local j = k0 + i
    local key = KEYS[j]
    if not loaded[key] then
      loaded[key] = true
      local raw = raws[j]
      if foreign[key] then
        bad[key] = true
      elseif kinds[i] == 0 then
        local a = 0
        if raw then a = read(raw, now, params[i][3]) end
        if a then state[key] = a else bad[key] = true end
      elseif raw then
        local st = steps[kinds[i]].parse(raw)
        if st then state[key] = st else bad[key] = true end
      end
    end
    if bad[key] then
      usable = false
      bads[#bads + 1] = j
    end
  end
  if not usable then
    for i = 1, 4 * m do out[4 * k0 + i + 1] = 0 end
  else
    -- Every tier is judged before any is charged.
    local admit = true
    for i = 1, m do
      local key = KEYS[k0 + i]
      local p = params[i]
      if kinds[i] == 0 then
        local _, over = step(state[key], cost, p[1], p[2])
        fits[i] = over == 0
      else
        local v = steps[kinds[i]].view(state[key], now, p)
        views[i] = v
        fits[i] = steps[kinds[i]].fits(v, cost, p)
      end
      if not fits[i] then admit = false end
    end
    for i = 1, m do
      local key = KEYS[k0 + i]
      local p = params[i]
      local o = 4 * (k0 + i - 1) + 1
      out[o + 1] = fits[i] and 1 or 0
      out[o + 4] = 0
      local charged = admit and cost > 0
      if charged and not dirty[key] then
        dirty[key] = true
        order[#order + 1] = key
        tier_of[key] = i
      end
      if kinds[i] == 0 then
        if charged then state[key] = step(state[key], cost, p[1], p[2]) end
        out[o + 2] = state[key]
        out[o + 3] = 0
      else
        local s = steps[kinds[i]]
        local v = views[i]
        if charged then
          s.charge(v, cost, p)
          state[key] = v
        elseif not fits[i] then
          out[o + 4] = s.wait(v, cost, p)
        end
        out[o + 2], out[o + 3] = s.numbers(v, p)
      end
    end
  end
end
for j = 1, #order do
  local key = order[j]
  local i = tier_of[key]
  if kinds[i] == 0 then
    store(key, now, state[key], params[i][3])
  else
    steps[kinds[i]].store(key, state[key], now, params[i])
  end
end
for _, j in ipairs(bads) do out[#out + 1] = j end
return out
