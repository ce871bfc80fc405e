-- cellrate: the GCRA step (after common.lua; the single, check, lease and
-- tiers scripts).
--
-- A tier runs at `scale` sub-ticks per microsecond (1 to 2^14): its
-- emission interval and span are integers of sub-ticks, span at most 2^52.
-- A TAT is stored as whole microseconds plus a fraction, '<us>' or
-- '<us>+<frac>/<scale>' (TAT = us + frac/scale us, 0 < frac < scale), so no
-- sum or product below leaves the exact integers: `(TAT - now)*scale +
-- frac` is at most the span for a TAT the script wrote (larger only after
-- the clock stepped back, and then capped at 2^53, where any request is
-- denied anyway).

-- TAT - now in sub-ticks at `scale` (0 when the TAT has passed, capped
-- at 2^53) for a stored value `raw`, or nil when `raw` is no TAT (not an
-- integer in [0, 2^53) nor a well-formed fraction). A fraction written at
-- another scale (the quota changed) is rounded up to this one: a later TAT
-- admits less.
local function read(raw, now, scale)
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
  if not (us >= 0 and us < TWO53 and us == floor(us)) then return nil end
  if us < now then return 0 end
  local ahead = (us - now) * scale + f
  if ahead > TWO53 then ahead = TWO53 end
  return ahead
end

-- The GCRA step: the one rule every script decides by. With `ahead` =
-- max(TAT, now) - now in sub-ticks (`read`), a request of `cost` cells of
-- `interval` sub-ticks each against a tier whose span is burst*interval
-- (tau + T) is admitted iff
--   ahead + cost*interval <= span
-- (the in-process GCRA's max(TAT, now) + cost*T - now <= tau + T). Returns
-- TAT - now after the request (`need`, what an admitted request stores)
-- and by how much it overshoots the span: 0 if admitted, else the wait
-- until the same request, alone, would be.
local function step(ahead, cost, interval, span)
  local need = ahead + cost * interval
  if need > span then return need, need - span end
  return need, 0
end

-- The same rule solved for the cost: how many cells `step` would admit
-- now, the largest g with ahead + g*interval <= span.
local function room(ahead, interval, span)
  if ahead >= span then return 0 end
  return (split(span - ahead, interval))
end

-- Writes the TAT `ahead` sub-ticks after `now`, expiring within a
-- millisecond after it has passed (never before: an expired key reads as
-- a full bucket).
local function store(key, now, ahead, scale)
  local q, f = ahead, 0
  if scale ~= 1 then q, f = split(ahead, scale) end
  -- (A memo hit is read inline: a call per number would cost more.)
  local tat, px = now + q, floor(q / 1000) + 1
  local v = memo[tat] or num(tat)
  if f > 0 then v = v .. '+' .. num(f) .. '/' .. num(scale) end
  call('SET', key, v, 'PX', memo[px] or num(px))
end
