-- cellrate: what the window steps share (after common.lua, before the
-- step_*.lua files; only the tiers script includes it).
--
-- A window step keeps its state in one string per key, fields separated by
-- ':' or ',' and led by a letter naming the algorithm ('F', 'S', 'B', 'L'),
-- so a value of another algorithm (or a GCRA TAT) is unreadable, never
-- misread. Every field is an integer below 2^53.

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
