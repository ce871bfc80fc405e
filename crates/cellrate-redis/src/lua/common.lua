-- cellrate: shared by every script (prepended to each): the clock, the
-- integer formatter and the exact quotient.
--
-- Numbers are doubles, exact for integers below 2^53. Time is `TIME` in
-- whole microseconds (about 2^50.6 now, below 2^52 until 2112).
local TWO53 = 9007199254740992
-- The library functions a decision uses, as locals of the script (a
-- global's table lookup at every use otherwise).
local tonumber, floor, format, call = tonumber, math.floor, string.format, redis.call

-- The server's time in whole microseconds.
local function clock()
  local t = call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- The one integer formatter: '%d', exact below 2^63 where Lua's integer
-- format is 64-bit (checked on the first use in a call), else '%.0f'
-- (exact below 2^53); never tostring ('%.14g'), which would round. Strings
-- are memoised per call (a batch repeats TATs, expiries and counts).
local fmt = nil
local memo = {}
local function num(x)
  local v = memo[x]
  if v then return v end
  if not fmt then
    fmt = '%d'
    if format(fmt, 4503599627370497) ~= '4503599627370497' then fmt = '%.0f' end
  end
  v = format(fmt, x)
  memo[x] = v
  return v
end

-- x = q*s + r with 0 <= r < s, for integers 0 <= x < 2^53, 1 <= s < 2^53:
-- the quotient of two doubles may round up to the next integer; fix that.
local function split(x, s)
  if s == 1 then return x, 0 end
  local q = floor(x / s)
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

