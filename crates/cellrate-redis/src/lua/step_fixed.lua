-- The fixed window step (window/fixed.rs): at most `limit` cells in each
-- aligned window [k*W, (k+1)*W) of the server's microseconds.
-- Stored: 'F<k>:<count>~<limit>/<W>' (the window written in, its count
-- and the parameters; window.lua).
-- Params: p[1] = limit, p[2] = W (us).
local fixed = {}

-- The state, and whether it was re-expressed under `p` (written under
-- other parameters: the count of now's window under those, at most the
-- limit, in now's window); nil when unreadable.
function fixed.parse(raw, now, p)
  local k, c = string.match(raw, '^F(%d+):(%d+)$')
  local t = ''
  if not k then
    k, c, t = string.match(raw, '^F(%d+):(%d+)(~.*)$')
    if not k then return nil end
  end
  k, c = field(k), field(c)
  if not k or not c then return nil end
  local st = {k = k, c = c}
  if t == '' and not p.base then return st end
  local old = tagged(t, p)
  if old == nil then return st end
  if old == false then return nil end
  local v = fixed.view(st, now, old)
  if v.c == 0 then return {k = 0, c = 0}, false end
  local c2 = v.c
  if c2 > p[1] then c2 = p[1] end
  return {k = (split(now, p[2])), c = c2}, true
end

-- The window that judges `now`: now's own (k, its count or 0), or one
-- ahead of it when the stored state is (the clock stepped back), judged as
-- it stands; `until_end` counts to the end of the judged window.
function fixed.view(st, now, p)
  local limit, w = p[1], p[2]
  local k, e = split(now, w)
  local until_end = w - e
  if st then
    local c = st.c
    if c > limit then c = limit end
    if st.k == k then return {k = k, c = c, until_end = until_end} end
    if st.k == k + 1 and c > 0 then return {k = k + 1, c = c, until_end = until_end + w} end
  end
  return {k = k, c = 0, until_end = until_end}
end

function fixed.fits(v, cost, p) return v.c + cost <= p[1] end

function fixed.wait(v, cost, p) return v.until_end end

-- remaining, reset_after.
function fixed.numbers(v, p)
  if v.c == 0 then return p[1], 0 end
  return p[1] - v.c, v.until_end
end

function fixed.charge(v, cost, p) v.c = v.c + cost end

function fixed.store(key, v, now, p)
  put(key, 'F' .. num(v.k) .. ':' .. num(v.c) .. (p.base and tagged(nil, p) or ''), (v.k + 1) * p[2] - now)
end
