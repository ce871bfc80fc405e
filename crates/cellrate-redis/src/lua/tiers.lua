-- cellrate tiers check: n >= 1 requests of a policy of m tiers, each tier
-- with its own algorithm, decided in order at one server time (batch.lua:
-- keys, costs, all or nothing, unreadable keys). A policy of one window
-- tier runs its algorithm's one-tier script (one.lua) instead.
-- ARGV after m: per tier its kind and three parameters:
--   0 GCRA:            interval, span, scale   (gcra.lua)
--   1 fixed window:    limit, W, 0             (step_fixed.lua)
--   2 sliding window:  limit, W, 0             (step_sliding.lua)
--   3 bucketed window: limit, b, N             (step_bucketed.lua)
--   4 sliding log:     limit, W, 0             (step_log.lua)
-- Returns {now, (fits, x, y, z) per key ..., bad ...}: per key whether the
-- request fits that tier (1 or 0) and
--   GCRA:    x = TAT - now (sub-ticks), after the request if it was
--            admitted, else before it; y = z = 0;
--   windows: x = remaining, y = reset_after (us), after the request if it
--            was admitted, else before it; z = retry_after (us) when the
--            request does not fit that tier, else 0;
-- then the index of every key that holds nothing its tier can read.
local now = clock()
local params, m, n, costs = batch_args(4)
if not params then return redis.error_reply('cellrate: bad tiers arguments') end
local kinds = {}
for i = 1, m do kinds[i] = table.remove(params[i], 1) end
local steps = {[1] = fixed, [2] = sliding, [3] = bucketed, [4] = log}
-- A key's state: GCRA's TAT - now in sub-ticks, or its window step's.
local gcra = {}
for i = 1, m do
  if kinds[i] == 0 then
    local p = params[i]
    if p.base then p[4] = '~' .. num(p[1]) .. '/' .. num(p[2]) .. '/' .. num(p[3]) end
    gcra[i] = p
  end
end
-- A sliding log reads its own keys (its header, then the slots it needs).
local loads = nil
for i = 1, m do
  if kinds[i] == 4 then
    loads = loads or {}
    loads[i] = function(key) return log.load(key, params[i], now) end
  end
end
local unreadable = read_keys(now, m, gcra, function(raw, i)
  return steps[kinds[i]].parse(raw, now, params[i])
end, loads)
local out, fits, views = {now}, {}, {}
for r = 1, n do
  local cost, k0 = costs[r], (r - 1) * m
  if unreadable and not readable(k0, m) then
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
      if charged and not tier_of[key] then tier_of[key], order[#order + 1] = i, key end
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
return finish(out, now, gcra, function(key, st, i)
  steps[kinds[i]].store(key, st, now, params[i])
end)
