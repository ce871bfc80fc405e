-- The fixed window step (window/fixed.rs): at most `limit` cells in each
-- aligned window [k*W, (k+1)*W) of the server's microseconds.
-- Stored: 'F<k>:<count>' (the window written in and its count).
-- Params: p[1] = limit, p[2] = W (us).
local fixed = {}

function fixed.parse(raw)
  local k, c = string.match(raw, '^F(%d+):(%d+)$')
  if not k then return nil end
  k, c = field(k), field(c)
  if not k or not c then return nil end
  return {k = k, c = c}
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
  put(key, 'F' .. num(v.k) .. ':' .. num(v.c), (v.k + 1) * p[2] - now)
end
