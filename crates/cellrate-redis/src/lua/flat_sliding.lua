-- cellrate sliding window, one tier, the common path (first in the
-- script): one.lua's contract and answers (step_sliding.lua's rule) for
-- requests whose keys are absent or hold an untagged 'S<k>:<p>:<c>' of a
-- limiter on its base, written straight through (flat_fixed.lua says
-- why and what leaves this block for the general code after it, and how a
-- key rewritten in the window it already held keeps its expiry). Every
-- quotient is common.lua's `split` (q, then one correction), written out.
repeat
  local n, na = #KEYS, #ARGV
  if ARGV[1] ~= '1' or n < 1 or (na ~= 6 and na ~= 5 + n) then break end
  local format, match, floor, call = string.format, string.match, math.floor, redis.call
  local limit, w = ARGV[3] + 0, ARGV[4] + 0
  local t = call('TIME')
  local now = t[1] * 1000000 + t[2]
  -- now = k*w + e, 0 <= e < w.
  local k = floor(now / w)
  local e = now - k * w
  if e < 0 then
    k, e = k - 1, e + w
  elseif e >= w then
    k, e = k + 1, e - w
  end
  if n == 1 then
    local key, cost = KEYS[1], ARGV[6] + 0
    local raw = redis.pcall('GET', key)
    -- The stored window (nil: none); the judged one, the previous and
    -- current counts there, the microseconds elapsed in it and how far
    -- ahead of now it starts (the clock stepped back).
    local a, j, p, c, ev, lead = nil, k, 0, 0, e, 0
    if raw then
      if type(raw) == 'table' then return {now, 0, 0, 0, 0, 1} end
      local x, y
      a, x, y = match(raw, '^S(%d+):(%d+):(%d+)$')
      if not a then break end
      a, x, y = a + 0, x + 0, y + 0
      if a >= 9007199254740992 or x >= 9007199254740992 or y >= 9007199254740992 then break end
      if x > limit then x = limit end
      if y > limit then y = limit end
      if a == k then
        p, c = x, y
      elseif a + 1 == k then
        p = y
      elseif a == k + 1 and (x > 0 or y > 0) then
        j, p, c, ev, lead = a, x, y, 0, w - e
      end
    end
    local fit = cost == 0 or (c + cost <= limit and p * (w - ev) <= (limit - c - cost) * w)
    local wait = 0
    if fit then
      if cost > 0 then
        if format('%d', 4503599627370497) ~= '4503599627370497' then break end
        c = c + cost
        local text = format('S%d:%d:%d', j, p, c)
        if j == a and #text >= #raw then
          call('SETRANGE', key, 0, text)
        else
          call('SET', key, text, 'PX', floor(((j + 2) * w - now) / 1000) + 1)
        end
      end
    else
      -- The first microsecond at which `cost` fits with no more traffic:
      -- in this window while c + cost <= limit, else in the next.
      local x, s
      if c + cost <= limit then
        x, s = (limit - c - cost) * w, p
      else
        x, s = (limit - cost) * w, c
      end
      if s < 1 then s = 1 end
      local q = floor(x / s)
      local r = x - q * s
      if r < 0 then q = q - 1 elseif r >= s then q = q + 1 end
      if q > w then q = w end
      if c + cost <= limit then
        wait = (w - q) - ev
        if wait < 0 then wait = 0 end
      else
        wait = (w - ev) + (w - q)
      end
      wait = wait + lead
    end
    -- remaining = floor(((limit - c)*w - p*(w - ev))/w); reset_after:
    -- until both counts have left the estimate.
    local slack = (limit - c) * w - p * (w - ev)
    if slack < 0 then slack = 0 end
    local q = floor(slack / w)
    local r = slack - q * w
    if r < 0 then q = q - 1 elseif r >= w then q = q + 1 end
    local reset = 0
    if c > 0 then
      reset = (w - ev) + w + lead
    elseif p > 0 then
      reset = (w - ev) + lead
    end
    return {now, fit and 1 or 0, q, reset, wait}
  end
  -- Several requests: one MGET; an absent key that exists holds another
  -- type (the general code reports it). Per key, read once: the stored
  -- window (false: none), the judged one and its two counts; each request
  -- then decides on what the last one left.
  local raws = call('MGET', unpack(KEYS))
  local absent = nil
  for r = 1, n do
    if not raws[r] then
      absent = absent or {}
      absent[#absent + 1] = KEYS[r]
    end
  end
  if absent and call('EXISTS', unpack(absent)) > 0 then break end
  local held, win, prev, count, ok = {}, {}, {}, {}, true
  for r = 1, n do
    local key, raw = KEYS[r], raws[r]
    if not win[key] then
      local a, j, p, c = false, k, 0, 0
      if raw then
        local x, y
        a, x, y = match(raw, '^S(%d+):(%d+):(%d+)$')
        if not a then
          ok = false
          break
        end
        a, x, y = a + 0, x + 0, y + 0
        if a >= 9007199254740992 or x >= 9007199254740992 or y >= 9007199254740992 then
          ok = false
          break
        end
        if x > limit then x = limit end
        if y > limit then y = limit end
        if a == k then
          p, c = x, y
        elseif a + 1 == k then
          p = y
        elseif a == k + 1 and (x > 0 or y > 0) then
          j, p, c = a, x, y
        end
      end
      held[key], win[key], prev[key], count[key] = a == j and #raw, j, p, c
    end
  end
  if not ok then break end
  local out, order, changed, cost = {now}, {}, {}, ARGV[6] + 0
  for r = 1, n do
    local key = KEYS[r]
    if na ~= 6 then cost = ARGV[5 + r] + 0 end
    local j, p, c = win[key], prev[key], count[key]
    local ev, lead, o = e, 0, 4 * r - 2
    if j ~= k then ev, lead = 0, w - e end
    local fit = cost == 0 or (c + cost <= limit and p * (w - ev) <= (limit - c - cost) * w)
    local wait = 0
    if fit then
      if cost > 0 then
        if not changed[key] then
          changed[key] = true
          order[#order + 1] = key
        end
        c = c + cost
        count[key] = c
      end
    else
      local x, s
      if c + cost <= limit then
        x, s = (limit - c - cost) * w, p
      else
        x, s = (limit - cost) * w, c
      end
      if s < 1 then s = 1 end
      local q = floor(x / s)
      local rr = x - q * s
      if rr < 0 then q = q - 1 elseif rr >= s then q = q + 1 end
      if q > w then q = w end
      if c + cost <= limit then
        wait = (w - q) - ev
        if wait < 0 then wait = 0 end
      else
        wait = (w - ev) + (w - q)
      end
      wait = wait + lead
    end
    local slack = (limit - c) * w - p * (w - ev)
    if slack < 0 then slack = 0 end
    local q = floor(slack / w)
    local rr = slack - q * w
    if rr < 0 then q = q - 1 elseif rr >= w then q = q + 1 end
    local reset = 0
    if c > 0 then
      reset = (w - ev) + w + lead
    elseif p > 0 then
      reset = (w - ev) + lead
    end
    out[o], out[o + 1], out[o + 2], out[o + 3] = fit and 1 or 0, q, reset, wait
  end
  if #order > 0 and format('%d', 4503599627370497) ~= '4503599627370497' then break end
  for r = 1, #order do
    local key = order[r]
    local j = win[key]
    local text, size = format('S%d:%d:%d', j, prev[key], count[key]), held[key]
    if size and #text >= size then
      call('SETRANGE', key, 0, text)
    else
      call('SET', key, text, 'PX', floor(((j + 2) * w - now) / 1000) + 1)
    end
  end
  return out
until true
