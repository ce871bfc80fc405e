-- cellrate fixed window, one tier, the common path (first in the script):
-- one.lua's contract and answers (step_fixed.lua's rule) for requests
-- whose keys are absent or hold an untagged 'F<k>:<c>' of a limiter on its
-- base, written straight through: no function is defined and no table
-- made before the decision. Anything else (a base or a tag, a value that
-- does not read so, a key of another type in a batch, a malformed call, a
-- '%d' narrower than 53 bits) leaves this block before any write and runs
-- the general code after it, which decides everything. A key rewritten in
-- the window it already held, by a value no shorter, is overwritten in
-- place (SETRANGE from 0, which keeps the expiry the write that moved it
-- there set to that window's end; SET's KEEPTTL needs Redis 6); any other
-- write sets the value and its expiry.
repeat
  local n, na = #KEYS, #ARGV
  if ARGV[1] ~= '1' or n < 1 or (na ~= 6 and na ~= 5 + n) then break end
  local format, match, floor, call = string.format, string.match, math.floor, redis.call
  local limit, w = ARGV[3] + 0, ARGV[4] + 0
  local t = call('TIME')
  local now = t[1] * 1000000 + t[2]
  -- now = k*w + e, 0 <= e < w (the quotient of two doubles corrected).
  local k = floor(now / w)
  local e = now - k * w
  if e < 0 then
    k, e = k - 1, e + w
  elseif e >= w then
    k, e = k + 1, e - w
  end
  local left = w - e
  if n == 1 then
    local key, cost = KEYS[1], ARGV[6] + 0
    local raw = redis.pcall('GET', key)
    -- The stored window (nil: none), the judged one (now's, or the one
    -- after it when the state is there: the clock stepped back), its count
    -- and the time to its end.
    local a, j, c, to_end = nil, k, 0, left
    if raw then
      if type(raw) == 'table' then return {now, 0, 0, 0, 0, 1} end
      local b
      a, b = match(raw, '^F(%d+):(%d+)$')
      if not a then break end
      a, b = a + 0, b + 0
      if a >= 9007199254740992 or b >= 9007199254740992 then break end
      if b > limit then b = limit end
      if a == k then
        c = b
      elseif a == k + 1 and b > 0 then
        j, c, to_end = a, b, left + w
      end
    end
    if c + cost <= limit then
      if cost > 0 then
        if format('%d', 4503599627370497) ~= '4503599627370497' then break end
        c = c + cost
        local text = format('F%d:%d', j, c)
        if j == a and #text >= #raw then
          call('SETRANGE', key, 0, text)
        else
          call('SET', key, text, 'PX', floor(((j + 1) * w - now) / 1000) + 1)
        end
      end
      if c == 0 then return {now, 1, limit, 0, 0} end
      return {now, 1, limit - c, to_end, 0}
    end
    if c == 0 then return {now, 0, limit, 0, to_end} end
    return {now, 0, limit - c, to_end, to_end}
  end
  -- Several requests: one MGET; an absent key that exists holds another
  -- type (the general code reports it). Per key, read once: the stored
  -- window (false: none), the judged one and its count; each request then
  -- decides on what the last one left.
  local raws = call('MGET', unpack(KEYS))
  local absent = nil
  for r = 1, n do
    if not raws[r] then
      absent = absent or {}
      absent[#absent + 1] = KEYS[r]
    end
  end
  if absent and call('EXISTS', unpack(absent)) > 0 then break end
  local held, win, count, ok = {}, {}, {}, true
  for r = 1, n do
    local key, raw = KEYS[r], raws[r]
    if not win[key] then
      local a, j, c = false, k, 0
      if raw then
        local b
        a, b = match(raw, '^F(%d+):(%d+)$')
        if not a then
          ok = false
          break
        end
        a, b = a + 0, b + 0
        if a >= 9007199254740992 or b >= 9007199254740992 then
          ok = false
          break
        end
        if b > limit then b = limit end
        if a == k then
          c = b
        elseif a == k + 1 and b > 0 then
          j, c = a, b
        end
      end
      held[key], win[key], count[key] = a == j and #raw, j, c
    end
  end
  if not ok then break end
  local out, order, changed, cost = {now}, {}, {}, ARGV[6] + 0
  for r = 1, n do
    local key = KEYS[r]
    if na ~= 6 then cost = ARGV[5 + r] + 0 end
    local j, c = win[key], count[key]
    local to_end, o = left + (j - k) * w, 4 * r - 2
    if c + cost <= limit then
      if cost > 0 then
        if not changed[key] then
          changed[key] = true
          order[#order + 1] = key
        end
        c = c + cost
        count[key] = c
      end
      out[o], out[o + 3] = 1, 0
    else
      out[o], out[o + 3] = 0, to_end
    end
    if c == 0 then
      out[o + 1], out[o + 2] = limit, 0
    else
      out[o + 1], out[o + 2] = limit - c, to_end
    end
  end
  if #order > 0 and format('%d', 4503599627370497) ~= '4503599627370497' then break end
  for r = 1, #order do
    local key = order[r]
    local j = win[key]
    local text, size = format('F%d:%d', j, count[key]), held[key]
    if size and #text >= size then
      call('SETRANGE', key, 0, text)
    else
      call('SET', key, text, 'PX', floor(((j + 1) * w - now) / 1000) + 1)
    end
  end
  return out
until true
