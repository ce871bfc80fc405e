-- cellrate: shared by every script (prepended to each).
--
-- Numbers are doubles, exact for integers below 2^53. Time is `TIME` in
-- whole microseconds (about 2^50.6 now, below 2^52 until 2112). A tier runs
-- at `scale` sub-ticks per microsecond (1 to 2^14): its emission interval
-- and span are integers of sub-ticks, span at most 2^52. A TAT is stored as
-- whole microseconds plus a fraction, '<us>' or '<us>+<frac>/<scale>'
-- (TAT = us + frac/scale us, 0 < frac < scale), so no sum or product below
-- leaves the exact integers: `(TAT - now)*scale + frac` is at most the span
-- for a TAT the script wrote (larger only after the clock stepped back, and
-- then capped at 2^53, where any request is denied anyway).
local TWO53 = 9007199254740992

-- x = q*s + r with 0 <= r < s, for integers 0 <= x < 2^53, 1 <= s < 2^53:
-- the quotient of two doubles may round up to the next integer; fix that.
local function split(x, s)
  if s == 1 then return x, 0 end
  local q = math.floor(x / s)
  local r = x - q * s
  if r < 0 then
    q = q - 1
    r = r + s
  elseif r >= s then
    q = q + 1
    r = r - s
  end
  return q, r
end

-- A stored TAT as (us, sub-ticks at `scale`), the fraction rounded up when
-- it was written at another scale (a later TAT admits less); nil when `raw`
-- is no TAT (not an integer in [0, 2^53), a malformed fraction).
local function parse(raw, scale)
  local us = tonumber(raw)
  local f = 0
  if not us then
    local a, b, c = string.match(raw, '^(%d+)%+(%d+)/(%d+)$')
    if not a then return nil end
    us, f = tonumber(a), tonumber(b)
    local sc = tonumber(c)
    if sc < 1 or sc > 1048576 or f >= sc then return nil end
    if sc ~= scale then
      f = math.ceil(f * scale / sc)
      if f >= scale then
        us = us + 1
        f = 0
      end
    end
  end
  if not (us >= 0 and us < TWO53 and us == math.floor(us)) then return nil end
  return us, f
end

-- TAT - now in sub-ticks (0 when the TAT has passed), capped at 2^53.
local function ahead_of(us, f, now, scale)
  if us < now then return 0 end
  local a = (us - now) * scale + f
  if a > TWO53 then a = TWO53 end
  return a
end

-- Decimal integers: '%d' is exact below 2^63 where Lua's integer format is
-- 64-bit (checked once per call that writes), else '%.0f' (exact below 2^53).
local fmt = nil
local memo = {}
local function int(x)
  if not fmt then
    fmt = '%d'
    if string.format(fmt, 4503599627370497) ~= '4503599627370497' then fmt = '%.0f' end
  end
  local s = memo[x]
  if not s then
    s = string.format(fmt, x)
    memo[x] = s
  end
  return s
end

-- Writes the TAT `ahead` sub-ticks after `now`, expiring within a
-- millisecond after it has passed (never before: an expired key reads as
-- a full bucket).
local function store(key, now, ahead, scale)
  local q, f = split(ahead, scale)
  local v = int(now + q)
  if f > 0 then v = v .. '+' .. int(f) .. '/' .. int(scale) end
  redis.call('SET', key, v, 'PX', int(math.floor(q / 1000) + 1))
end
