-- The sliding window step (window/sliding.rs): the two-window estimate
--   estimate(now) = p*(W - e)/W + c
-- (p, c: the counts of the previous and the current aligned window, e the
-- microseconds elapsed in the current one), admitted iff
--   c + cost <= limit  and  p*(W - e) <= (limit - c - cost)*W
-- in integers. limit*W < 2^53 (checked by the tier), so every product is
-- exact. Stored: 'S<k>:<p>:<c>~<limit>/<W>' (window.lua). Params: p[1] =
-- limit, p[2] = W (us).
local sliding = {}

-- The state, and whether it was re-expressed under `p`; nil when
-- unreadable. Written under other parameters: on the same grid (the same
-- W) both counts of now's view are kept; across grids the estimate
-- c + ceil(p*(W0 - e)/W0) becomes now's count in the new grid; either at
-- most the limit.
function sliding.parse(raw, now, p)
  local k, a, b = string.match(raw, '^S(%d+):(%d+):(%d+)$')
  local t = ''
  if not k then
    k, a, b, t = string.match(raw, '^S(%d+):(%d+):(%d+)(~.*)$')
    if not k then return nil end
  end
  k, a, b = field(k), field(a), field(b)
  if not k or not a or not b then return nil end
  local st = {k = k, p = a, c = b}
  if t == '' and not p.base then return st end
  local old = tagged(t, p)
  if old == nil then return st end
  if old == false then return nil end
  local v = sliding.view(st, now, old)
  if v.p == 0 and v.c == 0 then return {k = 0, p = 0, c = 0}, false end
  local limit, w, w0 = p[1], p[2], old[2]
  local prev, cur = v.p, v.c
  if w ~= w0 then
    local q, r = split(v.p * (w0 - v.e), w0)
    if r > 0 then q = q + 1 end
    prev, cur = 0, v.c + q
  end
  if prev > limit then prev = limit end
  if cur > limit then cur = limit end
  return {k = (split(now, w)), p = prev, c = cur}, true
end

-- As the in-process view: the state of now's window (k), of the one before
-- (its count becomes the previous one), or one window ahead (the clock
-- stepped back: judged at that window's start, `lead` microseconds from
-- now); anything older counts nothing.
function sliding.view(st, now, p)
  local limit, w = p[1], p[2]
  local k, e = split(now, w)
  if st then
    local a, b = st.p, st.c
    if a > limit then a = limit end
    if b > limit then b = limit end
    if st.k == k then return {k = k, p = a, c = b, e = e, lead = 0} end
    if st.k + 1 == k then return {k = k, p = b, c = 0, e = e, lead = 0} end
    if st.k == k + 1 and (a > 0 or b > 0) then
      return {k = k + 1, p = a, c = b, e = 0, lead = w - e}
    end
  end
  return {k = k, p = 0, c = 0, e = e, lead = 0}
end

-- (A cost of 0 is a peek, which fits even when the estimate is over the
-- limit: after a change that lowered it on the same grid.)
function sliding.fits(v, cost, p)
  local limit, w = p[1], p[2]
  return cost == 0 or (v.c + cost <= limit and v.p * (w - v.e) <= (limit - v.c - cost) * w)
end

-- The first microsecond (from now) at which `cost` fits, with no more
-- traffic: in this window while c + cost <= limit, else in the next.
function sliding.wait(v, cost, p)
  local limit, w = p[1], p[2]
  local wait
  if v.c + cost <= limit then
    local room = (limit - v.c - cost) * w
    local x = split(room, math.max(v.p, 1))
    if x > w then x = w end
    wait = (w - x) - v.e
    if wait < 0 then wait = 0 end
  else
    local room = (limit - cost) * w
    local y = split(room, math.max(v.c, 1))
    if y > w then y = w end
    wait = (w - v.e) + (w - y)
  end
  return wait + v.lead
end

-- remaining = floor(((limit - c)*W - p*(W - e))/W), reset_after: until
-- both counts have left the estimate.
function sliding.numbers(v, p)
  local limit, w = p[1], p[2]
  local slack = (limit - v.c) * w - v.p * (w - v.e)
  if slack < 0 then slack = 0 end
  local remaining = split(slack, w)
  local reset = 0
  if v.c > 0 then
    reset = (w - v.e) + w + v.lead
  elseif v.p > 0 then
    reset = (w - v.e) + v.lead
  end
  return remaining, reset
end

function sliding.charge(v, cost, p) v.c = v.c + cost end

function sliding.store(key, v, now, p)
  put(key, 'S' .. num(v.k) .. ':' .. num(v.p) .. ':' .. num(v.c) .. (p.base and tagged(nil, p) or ''), (v.k + 2) * p[2] - now)
end
