-- cellrate: what the window steps share (after common.lua, before the
-- step_*.lua files; only the tiers script includes it).
--
-- A window step keeps its state in one string per key, fields separated by
-- ':' or ',' and led by a letter naming the algorithm ('F', 'S', 'B', 'L'),
-- so a value of another algorithm (or a GCRA TAT) is unreadable, never
-- misread. Every field is an integer below 2^53. A state written under
-- other parameters than its limiter's base (those of the policy it was
-- first made with; `p.base` = {limit, W, N or 0}, given only when they
-- differ from the tier's) ends with them, '~<limit>/<W>' (the bucketed
-- window's '~<limit>/<b>/<N>'); an untagged one was written under the
-- base. One written under other parameters than the tier's is
-- re-expressed under the tier's as the in-process `translate` does (the
-- cells `now`'s window counts kept, at most the new limit).

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

-- One function for the parameters (a function defined in a script is
-- made on every call, so the rare paths share one): with `t` nil, the tag
-- of the tier's parameters `p` (computed once per call, kept in `p`);
-- else the parameters a state whose tail is `t` was written under when
-- they are not the tier's, as {limit, W[, N]} (`n`: the bucketed window's
-- three): the base for an untagged state (`t` = ''), else its tag's; nil
-- when they are the tier's, false when the tag is malformed.
local function tagged(t, p, n)
  if t == '' then return p.base end
  local tag = p.tag
  if not tag then
    tag = '~' .. num(p[1]) .. '/' .. num(p[2])
    if p[3] and p[3] > 0 then tag = tag .. '/' .. num(p[3]) end
    p.tag = tag
  end
  if t == nil then return tag end
  if t == tag then return nil end
  local a, b, c = string.match(t, '^~(%d+)/(%d+)/?(%d*)$')
  if not a then return false end
  a, b = field(a), field(b)
  if not a or not b or a < 1 or b < 1 then return false end
  if not n then
    if c ~= '' then return false end
    return {a, b}
  end
  c = field(c)
  if not c or c < 1 then return false end
  return {a, b, c}
end
