-- cellrate: the GCRA step (after common.lua; the single, check, lease and
-- tiers scripts).
--
-- A tier runs at `scale` sub-ticks per microsecond (1 to 2^14): its
-- emission interval and span are integers of sub-ticks, span at most 2^52.
-- A TAT is stored as whole microseconds plus a fraction, '<us>' or
-- '<us>+<frac>/<scale>' (TAT = us + frac/scale us, 0 < frac < scale; with
-- the parameters it was written under when they are not the base's,
-- below), so no sum or product below leaves the exact integers: `(TAT - now)*scale +
-- frac` is at most the span for a TAT the script wrote (larger only after
-- the clock stepped back, and then capped at 2^53, where any request is
-- denied anyway).

-- The parameters a TAT was written under. A limiter's *base* parameters
-- are those of the policy it was first made with (`base` = {T, span,
-- scale}, given only when they differ from the tier's): a TAT written
-- under them is '<us>' or '<us>+<frac>/<scale>', and one written under
-- others carries them, '<us><tag>' or '<us>+<frac><tag>' with `tag` =
-- '~<T>/<span>/<scale>'. So a limiter never reconfigured writes and reads
-- untagged values only.

-- TAT - now in sub-ticks at `scale` (0 when the TAT has passed, capped
-- at 2^53) for a stored value `raw`, or nil when `raw` is no TAT (not an
-- integer in [0, 2^53) nor a well-formed fraction, with or without a tag),
-- and whether it was re-expressed: a TAT written under other parameters
-- (T0, span0, scale0: its tag's, or `base` for an untagged one) keeps the
-- cells used, its debt d (sub-ticks of scale0) becoming
-- min(ceil(d*interval/T0), span), as the in-process translate does. `tag`
-- is the tier's (nil: computed when a tagged value needs it). An untagged
-- fraction written at another scale is rounded up to its own.
local function read(raw, now, scale, interval, span, tag, base)
  local us = tonumber(raw)
  local f, sc, t0 = 0, scale, nil
  if us then
    if base then t0, sc = base[1], base[3] end
  else
    local body, t = string.match(raw, '^([^~]*)(~.*)$')
    if body then
      if t ~= (tag or '~' .. num(interval) .. '/' .. num(span) .. '/' .. num(scale)) then
        local a, b = string.match(t, '^~(%d+)/%d+/(%d+)$')
        if not a then return nil end
        t0, sc = tonumber(a), tonumber(b)
        if t0 < 1 or t0 > 4503599627370496 or sc < 1 or sc > 1048576 then return nil end
      end
      us = tonumber(body)
      if not us then
        local a, b = string.match(body, '^(%d+)%+(%d+)$')
        if not a then return nil end
        us, f = tonumber(a), tonumber(b)
        if f >= sc then return nil end
      end
    else
      local a, b, c = string.match(raw, '^(%d+)%+(%d+)/(%d+)$')
      if not a then return nil end
      us, f, c = tonumber(a), tonumber(b), tonumber(c)
      if c < 1 or c > 1048576 or f >= c then return nil end
      if base then t0, sc = base[1], base[3] end
      if c ~= sc then
        f = math.ceil(f * sc / c)
        if f >= sc then
          us = us + 1
          f = 0
        end
      end
    end
  end
  if not (us >= 0 and us < TWO53 and us == floor(us)) then return nil end
  if us < now then return 0 end
  local ahead = (us - now) * sc + f
  if ahead > TWO53 then ahead = TWO53 end
  if not t0 or ahead == 0 then return ahead end
  -- Re-expressed: d*interval/T0 = q*interval + r*interval/T0, the last
  -- term ceil(r*interval/T0) (r < T0 <= 2^52) by binary long
  -- multiplication, every partial sum below 2^53. (Written inline: a
  -- function defined in the script would be made on every call.)
  if ahead >= TWO53 then ahead = TWO53 - 1 end
  local q, r = split(ahead, t0)
  if q * interval >= span then return span, true end
  local bits, nb, x = {}, 0, interval
  while x > 0 do
    local h = floor(x / 2)
    nb = nb + 1
    bits[nb] = x - 2 * h
    x = h
  end
  local p, rem = 0, 0
  for i = nb, 1, -1 do
    p, rem = 2 * p, 2 * rem
    if rem >= t0 then p, rem = p + 1, rem - t0 end
    if bits[i] == 1 then
      rem = rem + r
      if rem >= t0 then p, rem = p + 1, rem - t0 end
    end
  end
  if rem > 0 then p = p + 1 end
  ahead = q * interval + p
  if ahead > span then ahead = span end
  return ahead, true
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

-- Writes the TAT `ahead` sub-ticks after `now`, with the tier's `tag`
-- when it runs on other parameters than its base (nil: untagged),
-- expiring within a millisecond after it has passed (never before: an
-- expired key reads as a full bucket).
local function store(key, now, ahead, scale, tag)
  local q, f = ahead, 0
  if scale ~= 1 then q, f = split(ahead, scale) end
  -- (A memo hit is read inline: a call per number would cost more.)
  local tat, px = now + q, floor(q / 1000) + 1
  local v = memo[tat] or num(tat)
  if tag then
    if f > 0 then v = v .. '+' .. num(f) end
    v = v .. tag
  elseif f > 0 then
    v = v .. '+' .. num(f) .. '/' .. num(scale)
  end
  call('SET', key, v, 'PX', memo[px] or num(px))
end
