-- cellrate bucketed window, one tier, the common path (first in the
-- script): one.lua's contract and answers (step_bucketed.lua's rule) for
-- requests whose keys are absent or hold an untagged 'B<s>:<c_s>,...' of
-- exactly N counts, N at most 31 (one match captures them all), of a
-- limiter on its base, written straight through (flat_fixed.lua says why
-- and what leaves this block for the general code after it, and how a key
-- rewritten at the bucket it already held keeps its expiry). A key's view is one table, the table of its
-- value's fields: the stored bucket, then the judged window's N counts,
-- newest first (count i at index i + 1); T(d), the window's count d
-- buckets after the judged one with no more admissions, is T(d - 1) less
-- the oldest count T(d - 1) holds.
repeat
  local n, na, nb = #KEYS, #ARGV, tonumber(ARGV[5])
  if ARGV[1] ~= '1' or n < 1 or (na ~= 6 and na ~= 5 + n) or not nb or nb < 1 or nb > 31 then break end
  local format, match, floor, call = string.format, string.match, math.floor, redis.call
  local limit, b = ARGV[3] + 0, ARGV[4] + 0
  local pattern = '^B(%d+):' .. string.rep('(%d+),', nb - 1) .. '(%d+)$'
  local t = call('TIME')
  local now = t[1] * 1000000 + t[2]
  -- now = j*b + e, 0 <= e < b: now's bucket j.
  local j = floor(now / b)
  local e = now - j * b
  if e < 0 then
    j, e = j - 1, e + b
  elseif e >= b then
    j, e = j + 1, e - b
  end
  if n == 1 then
    local key, cost = KEYS[1], ARGV[6] + 0
    local raw = redis.pcall('GET', key)
    -- The stored bucket (false: none), the judged one (now's, or the
    -- stored one up to N - 1 ahead when it counts anything: the clock
    -- stepped back) and the view's counts.
    local a, s, v = false, j, nil
    if raw then
      if type(raw) == 'table' then return {now, 0, 0, 0, 0, 1} end
      v = {match(raw, pattern)}
      if not v[1] then break end
      local ok = true
      for i = 1, nb + 1 do
        local x = v[i] + 0
        if x >= 9007199254740992 then ok = false end
        v[i] = x
      end
      if not ok then break end
      a = v[1]
      local d = j - a
      if d > 0 and d < nb then
        for i = nb, 1, -1 do
          if i > d then v[i + 1] = v[i + 1 - d] else v[i + 1] = 0 end
        end
      elseif d < 0 and -d < nb then
        local any = false
        for i = 2, nb + 1 do
          if v[i] > 0 then any = true end
        end
        if any then s = a end
      elseif d ~= 0 then
        for i = 2, nb + 1 do v[i] = 0 end
      end
    else
      v = {j}
      for i = 2, nb + 1 do v[i] = 0 end
    end
    local until_next = b - e + (s - j) * b
    local total = 0
    for i = 2, nb + 1 do total = total + v[i] end
    -- (Below 2^53 every partial sum is exact; a larger one, which only
    -- another program can have written, goes to the general code.)
    if total >= 9007199254740992 then break end
    local fit, wait = cost == 0 or total + cost <= limit, 0
    if fit then
      if cost > 0 then
        if format('%d', 4503599627370497) ~= '4503599627370497' then break end
        v[2] = v[2] + cost
        total = total + cost
        local text = format('B%d:' .. string.rep('%d,', nb - 1) .. '%d', s, unpack(v, 2, nb + 1))
        if s == a and #text >= #raw then
          call('SETRANGE', key, 0, text)
        else
          call('SET', key, text, 'PX', floor(((s + nb) * b - now) / 1000) + 1)
        end
      end
    else
      -- Until the first bucket d >= 1 after the judged one whose window
      -- leaves room for `cost`.
      local d, td = 1, total - v[nb + 1]
      while d < nb and td + cost > limit do
        d = d + 1
        td = td - v[nb - d + 2]
      end
      wait = until_next + (d - 1) * b
    end
    local remaining, reset = limit - total, 0
    if remaining < 0 then remaining = 0 end
    if total ~= 0 then
      -- Until the first bucket whose window counts nothing.
      local d, td = 1, total - v[nb + 1]
      while d < nb and td > 0 do
        d = d + 1
        td = td - v[nb - d + 2]
      end
      reset = until_next + (d - 1) * b
    end
    return {now, fit and 1 or 0, remaining, reset, wait}
  end
  -- Several requests: one MGET; an absent key that exists holds another
  -- type (the general code reports it). Per key, read once: the stored
  -- bucket, the judged one and the view's counts; each request then
  -- decides on what the last one left (the same rule as above).
  local raws = call('MGET', unpack(KEYS))
  local absent = nil
  for r = 1, n do
    if not raws[r] then
      absent = absent or {}
      absent[#absent + 1] = KEYS[r]
    end
  end
  if absent and call('EXISTS', unpack(absent)) > 0 then break end
  local held, counts, judged, ok = {}, {}, {}, true
  for r = 1, n do
    local key, raw = KEYS[r], raws[r]
    if not counts[key] then
      local a, s, v = false, j, nil
      if raw then
        v = {match(raw, pattern)}
        ok = v[1] ~= nil
        if ok then
          for i = 1, nb + 1 do
            local x = v[i] + 0
            if x >= 9007199254740992 then ok = false end
            v[i] = x
          end
        end
        if not ok then break end
        a = v[1]
        local d = j - a
        if d > 0 and d < nb then
          for i = nb, 1, -1 do
            if i > d then v[i + 1] = v[i + 1 - d] else v[i + 1] = 0 end
          end
        elseif d < 0 and -d < nb then
          local any = false
          for i = 2, nb + 1 do
            if v[i] > 0 then any = true end
          end
          if any then s = a end
        elseif d ~= 0 then
          for i = 2, nb + 1 do v[i] = 0 end
        end
      else
        v = {j}
        for i = 2, nb + 1 do v[i] = 0 end
      end
      held[key], counts[key], judged[key] = a == s and #raw, v, s
    end
  end
  if not ok then break end
  local out, order, changed, cost = {now}, {}, {}, ARGV[6] + 0
  for r = 1, n do
    local key = KEYS[r]
    if na ~= 6 then cost = ARGV[5 + r] + 0 end
    local v, o = counts[key], 4 * r - 2
    local until_next = b - e + (judged[key] - j) * b
    local total = 0
    for i = 2, nb + 1 do total = total + v[i] end
    if total >= 9007199254740992 then
      ok = false
      break
    end
    local fit, wait = cost == 0 or total + cost <= limit, 0
    if fit then
      if cost > 0 then
        if not changed[key] then
          changed[key] = true
          order[#order + 1] = key
        end
        v[2] = v[2] + cost
        total = total + cost
      end
    else
      local d, td = 1, total - v[nb + 1]
      while d < nb and td + cost > limit do
        d = d + 1
        td = td - v[nb - d + 2]
      end
      wait = until_next + (d - 1) * b
    end
    local remaining, reset = limit - total, 0
    if remaining < 0 then remaining = 0 end
    if total ~= 0 then
      local d, td = 1, total - v[nb + 1]
      while d < nb and td > 0 do
        d = d + 1
        td = td - v[nb - d + 2]
      end
      reset = until_next + (d - 1) * b
    end
    out[o], out[o + 1], out[o + 2], out[o + 3] = fit and 1 or 0, remaining, reset, wait
  end
  if not ok then break end
  if #order > 0 then
    if format('%d', 4503599627370497) ~= '4503599627370497' then break end
    local text = 'B%d:' .. string.rep('%d,', nb - 1) .. '%d'
    for r = 1, #order do
      local key = order[r]
      local s = judged[key]
      local value, size = format(text, s, unpack(counts[key], 2, nb + 1)), held[key]
      if size and #value >= size then
        call('SETRANGE', key, 0, value)
      else
        call('SET', key, value, 'PX', floor(((s + nb) * b - now) / 1000) + 1)
      end
    end
  end
  return out
until true
