-- cellrate check: n >= 1 requests of one policy of m tiers, decided in
-- order at one server time.
-- KEYS: m per request (request r's tier i is key (r - 1)*m + i).
-- ARGV: m, then interval_i, span_i, scale_i per tier, then one cost per
-- request, or a single cost for all of them.
-- Returns {now, v_ri ..., bad ...}: one value per key, TAT - now (sub-ticks)
-- after the request if it was admitted (or is a peek that fits), else
-- -1 - (TAT - now) before it; then the index of every key that holds no
-- TAT (another type, or a string that is not one). A request with such a
-- key is not decided (its values are 0) and charges nothing; every other
-- request is decided as if it were absent. Such a key is never written.
-- Reads every key with one MGET (plus one EXISTS when some read as absent,
-- as a key of another type does, and TYPE only if one of them exists),
-- decides every request in memory, then writes each changed key once.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local m = tonumber(ARGV[1])
local intervals, spans, scales = {}, {}, {}
for i = 1, m do
  intervals[i] = tonumber(ARGV[3 * i - 1])
  spans[i] = tonumber(ARGV[3 * i])
  scales[i] = tonumber(ARGV[3 * i + 1])
end
local first = 3 * m + 1
local n = #KEYS / m
local uniform = #ARGV == first + 1
if m < 1 or n ~= math.floor(n) or (not uniform and #ARGV - first ~= n) then
  return redis.error_reply('cellrate: bad check arguments')
end
local cost = tonumber(ARGV[first + 1])
local raws, foreign = read_keys(KEYS)
-- Per key: TAT - now (sub-ticks at its tier's scale) once read, or bad.
-- Every request of the call is decided at the same `now`, so a key's
-- TAT - now after a request is what the next request of that key reads.
local ahead, bad = {}, {}
local out, dirty, order, bads = {now}, {}, {}, {}
-- The scale of each key written (the tier it belongs to).
local scale_of = {}
if m == 1 then
  -- One tier: the same decisions without the inner loops.
  local interval, span, scale = intervals[1], spans[1], scales[1]
  for r = 1, n do
    if not uniform then cost = tonumber(ARGV[first + r]) end
    local key = KEYS[r]
    local a = ahead[key]
    if not a and not bad[key] then
      local raw = raws[r]
      if raw then
        a = read(raw, now, scale)
      elseif not foreign[key] then
        a = 0
      end
      if a then
        ahead[key] = a
      else
        bad[key] = true
      end
    end
    if not a then
      out[r + 1] = 0
      bads[#bads + 1] = r
    else
      local need, over = step(a, cost, interval, span)
      if over > 0 then
        out[r + 1] = -1 - a
      else
        if cost > 0 then
          ahead[key] = need
          if not dirty[key] then
            dirty[key] = true
            order[#order + 1] = key
            scale_of[key] = scale
          end
        end
        out[r + 1] = need
      end
    end
  end
else
  local needs = {}
  for r = 1, n do
    if not uniform then cost = tonumber(ARGV[first + r]) end
    local k0 = (r - 1) * m
    local usable = true
    for i = 1, m do
      local j = k0 + i
      local key = KEYS[j]
      if not ahead[key] and not bad[key] then
        local raw = raws[j]
        local a = nil
        if raw then
          a = read(raw, now, scales[i])
        elseif not foreign[key] then
          a = 0
        end
        if a then
          ahead[key] = a
        else
          bad[key] = true
        end
      end
      if bad[key] then
        usable = false
        bads[#bads + 1] = j
      end
    end
    if not usable then
      for i = 1, m do out[k0 + i + 1] = 0 end
    else
      -- Every tier is checked before any is charged.
      local admit = true
      for i = 1, m do
        local need, over = step(ahead[KEYS[k0 + i]], cost, intervals[i], spans[i])
        needs[i] = need
        if over > 0 then admit = false end
      end
      for i = 1, m do
        local key = KEYS[k0 + i]
        if not admit then
          out[k0 + i + 1] = -1 - ahead[key]
        else
          if cost > 0 then
            ahead[key] = needs[i]
            if not dirty[key] then
              dirty[key] = true
              order[#order + 1] = key
              scale_of[key] = scales[i]
            end
          end
          out[k0 + i + 1] = needs[i]
        end
      end
    end
  end
end
for j = 1, #order do
  local key = order[j]
  store(key, now, ahead[key], scale_of[key])
end
for _, j in ipairs(bads) do out[#out + 1] = j end
return out
