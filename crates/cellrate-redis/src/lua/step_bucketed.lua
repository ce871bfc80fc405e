-- The bucketed window step (window/bucketed.rs): a window of N buckets of
-- b microseconds; bucket j is [j*b, (j+1)*b). A request in bucket j is
-- admitted iff the N buckets ending with j leave room:
--   c(j-N+1) + ... + c(j) + cost <= limit
-- Stored: 'B<s>:<c_s>,<c_(s-1)>,...~<limit>/<b>/<N>' (the last bucket
-- written and the counts of the N buckets ending with it, newest first; N
-- fields; the parameters, window.lua).
-- Params: p[1] = limit, p[2] = b (us), p[3] = N.
local bucketed = {}

-- The counts of the window ending with the judged bucket: now's bucket j
-- (a state d < N buckets behind moved on d buckets), or a state up to N - 1
-- buckets ahead of it (the clock stepped back), judged as it stands with
-- its times counted from there; anything else is empty. `until_next`: the
-- microseconds until the bucket after the judged one starts.
function bucketed.view(st, now, p)
  local b, n = p[2], p[3]
  local j, e = split(now, b)
  local v = {s = j, counts = {}, until_next = b - e}
  for i = 1, n do v.counts[i] = 0 end
  if not st then return v end
  local d = j - st.s
  if d >= 0 and d < n then
    for i = 1, n - d do v.counts[i + d] = st.counts[i] or 0 end
  elseif d < 0 and -d < n then
    local any = false
    for i = 1, n do
      v.counts[i] = st.counts[i] or 0
      if v.counts[i] > 0 then any = true end
    end
    if any then
      v.s = st.s
      v.until_next = v.until_next + (-d) * b
    else
      v.s = j
    end
  end
  return v
end

-- T(d): the window's count d buckets after the judged one, with no more
-- admissions (the newest N - d counts).
local function bucket_total(v, d, n)
  local t = 0
  for i = 1, n - d do t = t + v.counts[i] end
  return t
end

-- (A cost of 0 is a peek: it fits.)
function bucketed.fits(v, cost, p) return cost == 0 or bucket_total(v, 0, p[3]) + cost <= p[1] end

-- Until the first bucket d >= 1 after the judged one whose window leaves
-- `room` free.
local function bucket_wait(v, room, p)
  local limit, b, n = p[1], p[2], p[3]
  local d = 1
  while d < n and bucket_total(v, d, n) + room > limit do d = d + 1 end
  return v.until_next + (d - 1) * b
end

function bucketed.wait(v, cost, p) return bucket_wait(v, cost, p) end

function bucketed.numbers(v, p)
  local t = bucket_total(v, 0, p[3])
  local remaining = p[1] - t
  if remaining < 0 then remaining = 0 end
  if t == 0 then return remaining, 0 end
  return remaining, bucket_wait(v, p[1], p)
end

function bucketed.charge(v, cost, p) v.counts[1] = v.counts[1] + cost end

function bucketed.store(key, v, now, p)
  local parts = {}
  for i = 1, p[3] do parts[i] = num(v.counts[i]) end
  put(key, 'B' .. num(v.s) .. ':' .. table.concat(parts, ',') .. (p.base and tagged(nil, p) or ''), (v.s + p[3]) * p[2] - now)
end

-- The state, and whether it was re-expressed under `p` (written under
-- other parameters: the cells of now's window under those, at most the
-- limit, all in now's bucket); nil when unreadable.
function bucketed.parse(raw, now, p)
  local s, list = string.match(raw, '^B(%d+):([%d,]+)$')
  local t = ''
  if not s then
    s, list, t = string.match(raw, '^B(%d+):([%d,]+)(~.*)$')
    if not s then return nil end
  end
  s = field(s)
  if not s then return nil end
  local counts = {}
  for x in string.gmatch(list, '[^,]+') do
    local c = field(x)
    if not c then return nil end
    counts[#counts + 1] = c
  end
  if #counts == 0 or string.find(list, ',,', 1, true) or string.sub(list, -1) == ',' then
    return nil
  end
  local st = {s = s, counts = counts}
  if t == '' and not p.base then return st end
  local old = tagged(t, p, true)
  if old == nil then return st end
  if old == false then return nil end
  local total = bucket_total(bucketed.view(st, now, old), 0, old[3])
  local fresh = {s = (split(now, p[2])), counts = {}}
  for i = 1, p[3] do fresh.counts[i] = 0 end
  if total == 0 then return fresh, false end
  if total > p[1] then total = p[1] end
  fresh.counts[1] = total
  return fresh, true
end
