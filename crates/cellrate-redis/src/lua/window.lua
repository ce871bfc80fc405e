-- cellrate: what the window steps share (after common.lua, before the
-- step_*.lua files; only the tiers script includes it).
--
-- A window step keeps its state in one string per key, fields separated by
-- ':' or ',' and led by a letter naming the algorithm ('F', 'S', 'B', 'L'),
-- so a value of another algorithm (or a GCRA TAT) is unreadable, never
-- misread. Every field is an integer below 2^53. A state is written with
-- the parameters it was written under ('~<limit>/<W>', the bucketed
-- window's '~<limit>/<b>/<N>'): one written under others is re-expressed
-- under the tier's as the in-process `translate` does (the cells `now`'s
-- window counts kept, at most the new limit), and one without them
-- (written before they were kept) reads under the tier's.

-- An integer field in [0, 2^53), or nil.
local function field(s)
  local x = tonumber(s)
  if not x or x < 0 or x >= TWO53 or x ~= floor(x) then return nil end
  return x
end

-- Writes `value`, expiring `left` microseconds from now (rounded up to
-- whole milliseconds, plus one: never before the state stops mattering).
local function put(key, value, left)
  if left < 0 then left = 0 end
  call('SET', key, value, 'PX', num(floor(left / 1000) + 1))
end

-- The tag of a tier's parameters (computed once per call: kept in `p`).
local function wtag(p)
  local t = p.tag
  if not t then
    t = '~' .. num(p[1]) .. '/' .. num(p[2])
    if p[3] and p[3] > 0 then t = t .. '/' .. num(p[3]) end
    p.tag = t
  end
  return t
end

-- The parameters of a tag that is not the tier's, as {limit, W[, N]}, or
-- nil when it is malformed.
local function wparams(t, n)
  local a, b, c = string.match(t, '^~(%d+)/(%d+)/?(%d*)$')
  if not a then return nil end
  a, b = field(a), field(b)
  if not a or not b or a < 1 or b < 1 then return nil end
  if n then
    c = field(c)
    if not c or c < 1 then return nil end
    return {a, b, c}
  end
  if c ~= '' then return nil end
  return {a, b}
end
