-- cellrate check: n >= 1 requests of a policy of m GCRA tiers, decided in
-- order at one server time (batch.lua: keys, costs, unreadable keys).
-- ARGV after m: interval_i, span_i, scale_i per tier.
-- Returns {now, v_ri ..., bad ...}: one value per key, TAT - now (sub-ticks)
-- after the request if it was admitted (or is a peek that fits), else
-- -1 - (TAT - now) before it; then the index of every key that holds no TAT.
local now = clock()
local params, m, n, costs = batch_args(3)
if not params then return redis.error_reply('cellrate: bad check arguments') end
-- A key's state is TAT - now in sub-ticks at its tier's scale.
for i = 1, m do
  local p = params[i]
  if p.base then p[4] = '~' .. num(p[1]) .. '/' .. num(p[2]) .. '/' .. num(p[3]) end
end
local unreadable = read_keys(now, m, params)
local out, needs = {now}, {}
if m == 1 then
  -- One tier: the same decisions without the loops over tiers.
  local interval, span = params[1][1], params[1][2]
  for r = 1, n do
    local key, cost = KEYS[r], costs[r]
    local a = state[key]
    if bad[key] then
      out[r + 1], bads[#bads + 1] = 0, r
    else
      local need, over = step(a, cost, interval, span)
      if over > 0 then need = -1 - a elseif cost > 0 then
        state[key] = need
        if not tier_of[key] then tier_of[key], order[#order + 1] = 1, key end
      end
      out[r + 1] = need
    end
  end
  n = 0
end
for r = 1, n do
  local cost, k0 = costs[r], (r - 1) * m
  if unreadable and not readable(k0, m) then
    for i = 1, m do out[k0 + i + 1] = 0 end
  else
    -- Every tier is checked before any is charged.
    local admit = true
    for i = 1, m do
      local p = params[i]
      local need, over = step(state[KEYS[k0 + i]], cost, p[1], p[2])
      needs[i] = need
      if over > 0 then admit = false end
    end
    for i = 1, m do
      local key = KEYS[k0 + i]
      if not admit then
        out[k0 + i + 1] = -1 - state[key]
      else
        if cost > 0 then
          state[key] = needs[i]
          if not tier_of[key] then tier_of[key], order[#order + 1] = i, key end
        end
        out[k0 + i + 1] = needs[i]
      end
    end
  end
end
return finish(out, now, params)
