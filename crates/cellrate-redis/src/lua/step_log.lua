-- The sliding log step (window/log.rs): the in-process ring, on the server.
-- The expiry times (recorded time + W, microseconds) of the last `limit`
-- admitted cells, oldest first, in a ring of `limit` slots (0: an empty
-- slot, expired at every now). A cell counts until its expiry, so at most
-- `limit` cells lie in any W consecutive microseconds. The ring is sorted,
-- so the expired slots are a prefix; with `free` of them at now:
--   admit <=> cost <= free;  retry_after = slot[cost - 1] - now
--   remaining = free;        reset_after = newest - now (0 once passed)
-- (slots numbered from 0, the oldest) and an admission overwrites the
-- `cost` oldest slots with max(now + W, newest) and moves the head past
-- them, as the in-process log does.
--
-- Stored: one string, a header of 65 bytes, then `cap` slots of 16 decimal
-- digits each (physical order; a slot past the end of the string is
-- empty, so a new ring grows from physical slot 0):
--   'Lr' cap(5) head(5) known(5) last(16) next(16) newest(16)
-- or, on other parameters than the limiter's base (window.lua), 81 bytes:
--   'Ls' cap(5) head(5) known(5) last(16) next(16) newest(16) window(16)
-- cap (and window): the limit and W it was written under; head: the
-- physical slot of the oldest; newest = slot[cap - 1]; known, last, next:
-- a hint whose fields are copies of slots, last = slot[known - 1] (0 when
-- known = 0) and next = slot[known]. So newest <= now gives free = cap,
-- and last <= now < next gives free = known, without reading a slot;
-- otherwise the slots from the hint on (backwards if the clock stepped
-- back) are read in chunks of 16, 32, 64, ... up to the boundary.
--
-- Cost: a check reads the header (one GETRANGE) and, when the hint does
-- not answer, the slots between the hint and the boundary (a denial of
-- `cost` at most `cost` of them); an admission writes its `cost` slots
-- and the header (SETRANGE) and the expiry (PEXPIRE), a new ring one SET
-- ... PX. Nothing is proportional to the limit except an admission of a
-- cost that large, and a ring written under other parameters, read whole
-- and re-laid as the in-process `set_limit` does (below) and written back
-- whole (an 'Lr' ring was written under the base's window, an 'Ls' ring
-- read by a tier on its base is re-laid as 'Lr'). A value that does
-- not start with a well-formed header (another algorithm's, the comma
-- list of expiries earlier versions wrote, anything else) is unreadable;
-- a slot that does not read as a number counts as never expiring.
-- Params: p[1] = limit, p[2] = W (us).
local log = {}
local LOG_HEAD, SLOT = 81, 16

local HEAD_PATTERN = '^L([rs])(' .. string.rep('%d', 5) .. ')(' .. string.rep('%d', 5) .. ')('
  .. string.rep('%d', 5) .. ')(' .. string.rep('%d', 16) .. ')(' .. string.rep('%d', 16)
  .. ')(' .. string.rep('%d', 16) .. ')'

-- `x` in `width` digits, zero-padded (x < 10^width).
local function padded(x, width)
  local s = memo[x] or num(x)
  return string.rep('0', width - #s) .. s
end

-- Slot j (0-based) of `text`, read from the ring: 0 past its end.
local function decode(text, j)
  local o = j * SLOT
  if o >= #text then return 0 end
  if o + SLOT > #text then return TWO53 end
  return tonumber(string.sub(text, o + 1, o + SLOT)) or TWO53
end

-- Reads the `n` physical slots from `first` (not wrapping) into the cache,
-- keeping what the cache holds (slots changed in this call).
local function load_range(st, first, n)
  local text = ''
  if st.stored then
    local o = st.base + first * SLOT
    text = call('GETRANGE', st.key, o, o + n * SLOT - 1)
  end
  local s = st.slots
  for j = 0, n - 1 do
    if s[first + j] == nil then s[first + j] = decode(text, j) end
  end
end

-- Reads the logical slots [from, from + n) (clipped to the ring).
local function fetch(st, from, n)
  local cap = st.cap
  if from + n > cap then n = cap - from end
  if n <= 0 then return end
  local first = (st.head + from) % cap
  if first + n <= cap then
    load_range(st, first, n)
  else
    load_range(st, first, cap - first)
    load_range(st, 0, n - (cap - first))
  end
end

-- The expiry at logical slot i (0 the oldest).
local function slot_at(st, i)
  local ph = (st.head + i) % st.cap
  local x = st.slots[ph]
  if x == nil then
    fetch(st, i, 1)
    x = st.slots[ph]
  end
  return x
end

-- How many slots have expired at now (see the header's hint).
local function expired_count(st, now)
  local cap, known = st.cap, st.known
  if st.newest <= now then return cap end
  if st.next > now and st.last <= now then return known end
  local c = 16
  if st.next <= now then
    -- Slots up to `known` have expired; slot cap - 1 has not.
    local lo = known + 1
    while lo < cap do
      fetch(st, lo, c)
      local hi = lo + c
      if hi > cap then hi = cap end
      for i = lo, hi - 1 do
        if slot_at(st, i) > now then return i end
      end
      lo, c = hi, c * 2
    end
    return cap
  end
  -- Slot known - 1 has not expired (the clock stepped back).
  local hi = known - 1
  while hi > 0 do
    local lo = hi - c
    if lo < 0 then lo = 0 end
    fetch(st, lo, hi - lo)
    for i = hi - 1, lo, -1 do
      if slot_at(st, i) <= now then return i + 1 end
    end
    hi, c = lo, c * 2
  end
  return 0
end

-- A ring written under other parameters (limit0 = its size, W0), re-laid
-- for `limit` slots and window W as the in-process `set_limit` does: the
-- expiries that have not passed at now, each moved W - W0 later if the
-- window grew (a shorter one does not release them sooner), the newest
-- min(count, limit) of them, oldest first, empty slots before them.
local function relay(st, limit, w, now, head)
  local text = call('GETRANGE', st.key, st.base, -1)
  local cap, kept, grow = st.cap, {}, w - st.window
  for i = 0, cap - 1 do
    local x = decode(text, (st.head + i) % cap)
    if x > now then
      if grow > 0 then x = x + grow end
      kept[#kept + 1] = x
    end
  end
  local k = #kept
  if k > limit then k = limit end
  local s = {}
  for i = 0, limit - 1 do
    local j = i - (limit - k)
    s[i] = 0
    if j >= 0 then s[i] = kept[#kept - k + 1 + j] end
  end
  return {key = st.key, cap = limit, head = 0, known = 0, last = 0, next = s[0],
    newest = s[limit - 1], slots = s, stored = false, from = 0, dirty = limit, base = head}
end

-- The ring's header (one GETRANGE), its slots read when needed, and
-- whether it was re-laid under `p`; nil when the key is absent, false when
-- it holds no ring.
function log.load(key, p, now)
  local h = redis.pcall('GETRANGE', key, 0, LOG_HEAD - 1)
  if type(h) == 'table' then return false end
  if h == '' then
    if call('EXISTS', key) == 1 then return false end
    return nil
  end
  local kind, cap, head, known, last, nxt, newest = string.match(h, HEAD_PATTERN)
  if not kind then return false end
  cap, head, known = tonumber(cap), tonumber(head), tonumber(known)
  last, nxt, newest = tonumber(last), tonumber(nxt), tonumber(newest)
  if cap < 1 or head >= cap or known >= cap then return false end
  -- 'Lr': no window kept (written under the base's), slots from byte 65.
  local base, w0 = 65, (p.base and p.base[2]) or p[2]
  if kind == 's' then
    base, w0 = LOG_HEAD, tonumber(string.sub(h, 66, LOG_HEAD))
    if not w0 or #h < LOG_HEAD or w0 < 1 then return false end
  end
  local s = {}
  if known > 0 then s[(head + known - 1) % cap] = last end
  s[(head + known) % cap] = nxt
  s[(head + cap - 1) % cap] = newest
  local st = {key = key, cap = cap, head = head, known = known, last = last, next = nxt,
    newest = newest, slots = s, stored = true, from = 0, dirty = 0, base = base, window = w0}
  -- The header this tier writes: 'Lr' (65 bytes) on its base's
  -- parameters, 'Ls' (81, with the window) on others.
  local want = p.base and LOG_HEAD or 65
  if base ~= want or cap ~= p[1] or w0 ~= p[2] then return relay(st, p[1], p[2], now, want), true end
  return st
end

-- The ring at now (a new one when absent), with `free` set.
function log.view(st, now, p)
  if not st then
    st = {cap = p[1], head = 0, known = 0, last = 0, next = 0, newest = 0, slots = {},
      stored = false, from = 0, dirty = 0, base = p.base and LOG_HEAD or 65}
  end
  st.now = now
  st.free = expired_count(st, now)
  return st
end

function log.fits(v, cost, p) return cost <= v.free end

function log.wait(v, cost, p) return slot_at(v, cost - 1) - v.now end

function log.numbers(v, p)
  if v.newest <= v.now then return v.free, 0 end
  return v.free, v.newest - v.now
end

function log.charge(v, cost, p)
  local cap, free = v.cap, v.free
  local at = v.now + p[2]
  if v.newest > at then at = v.newest end
  -- The hint after the head moves past the `cost` oldest slots: the
  -- expired slots left and the first that has not expired.
  local last, nxt = 0, at
  if free > cost then last = slot_at(v, free - 1) end
  if free < cap then nxt = slot_at(v, free) end
  local s, h = v.slots, v.head
  for i = 0, cost - 1 do s[(h + i) % cap] = at end
  if v.dirty == 0 then v.from = h end
  v.dirty = v.dirty + cost
  if v.dirty > cap then v.dirty = cap end
  v.head = (h + cost) % cap
  v.known, v.last, v.next, v.newest, v.free = free - cost, last, nxt, at, free - cost
end

-- The slots [first, first + n) as stored text.
local function slot_text(s, first, n)
  local parts = {}
  for j = 0, n - 1 do parts[j + 1] = padded(s[first + j], SLOT) end
  return table.concat(parts)
end

function log.store(key, v, now, p)
  local cap, s = v.cap, v.slots
  local header = padded(v.cap, 5) .. padded(v.head, 5) .. padded(v.known, 5)
    .. padded(v.last, SLOT) .. padded(v.next, SLOT) .. padded(v.newest, SLOT)
  if v.base == LOG_HEAD then
    header = 'Ls' .. header .. padded(p[2], SLOT)
  else
    header = 'Lr' .. header
  end
  -- Until the newest expiry, at least 1 ms (a ring whose entries have all
  -- expired, re-expressed by a peek, still gets a valid expiry).
  local left = v.newest - now
  if left < 0 then left = 0 end
  local px = num(floor(left / 1000) + 1)
  if not v.stored then
    -- A new or re-laid ring: written from physical slot 0.
    call('SET', key, header .. slot_text(s, 0, v.from + v.dirty), 'PX', px)
    return
  end
  local first, n = v.from, v.dirty
  local head_part = n
  if first + n > cap then head_part = cap - first end
  call('SETRANGE', key, v.base + first * SLOT, slot_text(s, first, head_part))
  if head_part < n then call('SETRANGE', key, v.base, slot_text(s, 0, n - head_part)) end
  call('SETRANGE', key, 0, header)
  call('PEXPIRE', key, px)
end
