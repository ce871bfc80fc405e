-- The sliding window step (window/sliding.rs): the two-window estimate
--   estimate(now) = p*(W - e)/W + c
-- (p, c: the counts of the previous and the current aligned window, e the
-- microseconds elapsed in the current one), admitted iff
--   c + cost <= limit  and  p*(W - e) <= (limit - c - cost)*W
-- in integers. limit*W < 2^53 (checked by the tier), so every product is
-- exact. Stored: 'S<k>:<p>:<c>'. Params: p[1] = limit, p[2] = W (us).
local sliding = {}

function sliding.parse(raw)
  local k, a, b = string.match(raw, '^S(%d+):(%d+):(%d+)$')
  if not k then return nil end
  k, a, b = field(k), field(a), field(b)
  if not k or not a or not b then return nil end
  return {k = k, p = a, c = b}
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

function sliding.fits(v, cost, p)
  local limit, w = p[1], p[2]
  return v.c + cost <= limit and v.p * (w - v.e) <= (limit - v.c - cost) * w
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
  put(key, 'S' .. num(v.k) .. ':' .. num(v.p) .. ':' .. num(v.c), (v.k + 2) * p[2] - now)
end
