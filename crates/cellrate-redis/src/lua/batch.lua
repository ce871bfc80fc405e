-- cellrate: what the batch scripts share (after common.lua and gcra.lua,
-- before check.lua, tiers.lua or one_batch.lua): their arguments, one read
-- of every key, and one write of every changed key.
--
-- KEYS: m per request (request r's tier i is key (r - 1)*m + i).
-- ARGV: m, then `width` numbers per tier, then one cost per request, or a
-- single cost for all of them. A limiter running some tier on other
-- parameters than its base sends -m instead of m and three more numbers
-- per tier after its own: its base (gcra.lua, window.lua), or 0, 0, 0.
-- Every request is decided in memory at one server time, in order, so a
-- key's state after a request is what the next request of that key reads;
-- a request is admitted iff every tier admits it, and only then charged on
-- every tier. A key that holds nothing its tier can read (another type, or
-- a value its parser refuses) is reported by its index after the values:
-- a request that uses it is not decided (its values are 0) and charges
-- nothing, every other request is decided as if it were absent, and the key
-- is never written.

-- The tiers' numbers (`width` each, and `base` when given), m, n and each
-- request's cost; nil when the arguments do not fit the keys.
local function batch_args(width)
  local m = tonumber(ARGV[1])
  local stride = width
  if m < 0 then m, stride = -m, width + 3 end
  local params = {}
  for i = 1, m do
    local p, o = {}, stride * (i - 1) + 1
    for w = 1, width do p[w] = tonumber(ARGV[o + w]) end
    if stride > width and ARGV[o + width + 1] ~= '0' then
      p.base = {tonumber(ARGV[o + width + 1]), tonumber(ARGV[o + width + 2]),
        tonumber(ARGV[o + width + 3])}
    end
    params[i] = p
  end
  local first = stride * m + 1
  local n = #KEYS / m
  local uniform = #ARGV == first + 1
  if m < 1 or n ~= floor(n) or (not uniform and #ARGV - first ~= n) then return nil end
  local costs, cost = {}, tonumber(ARGV[first + 1])
  for r = 1, n do
    if not uniform then cost = tonumber(ARGV[first + r]) end
    costs[r] = cost
  end
  return params, m, n, costs
end

-- Per key: its state once read (nil for a window key that holds none) or
-- whether it is unreadable; the indices reported unreadable; the changed
-- keys in the order of their first change, and the tier of each.
local state, bad, bads, order, tier_of = {}, {}, {}, {}, {}

-- Reads every key once: one MGET, then a key of GCRA tier i (`gcra[i]` =
-- {interval, span, scale, tag, base = ...}) by `read` (0 when absent), a key of any
-- other tier i by `parse(raw, i)` (its state or nil; nothing read when
-- absent). A state re-expressed under the tier's parameters (they changed
-- since it was written) counts as changed, so it is written back. A key
-- that reads as absent but holds another type is unreadable: one EXISTS
-- when some read as absent, and TYPE only if one of them exists. A tier
-- with `loads[i]` reads its own keys instead (they are left out of the
-- MGET): `loads[i](key)` is the state, nil when absent, false when
-- unreadable. Returns whether any key is unreadable.
local function read_keys(now, m, gcra, parse, loads)
  local fetched, at = KEYS, nil
  if loads then
    fetched, at = {}, {}
    for j = 1, #KEYS do
      if not loads[(j - 1) % m + 1] then
        fetched[#fetched + 1] = KEYS[j]
        at[j] = #fetched
      end
    end
  end
  local raws, foreign = nil, {}
  if #fetched > 0 then
    raws = call('MGET', unpack(fetched))
    local absent = {}
    for j = 1, #fetched do
      if not raws[j] then absent[#absent + 1] = fetched[j] end
    end
    if #absent > 0 and call('EXISTS', unpack(absent)) > 0 then
      for _, k in ipairs(absent) do
        if call('TYPE', k)['ok'] ~= 'none' then foreign[k] = true end
      end
    end
  end
  local any = false
  for j = 1, #KEYS do
    local key = KEYS[j]
    if state[key] == nil and not bad[key] then
      local i = (j - 1) % m + 1
      local st, moved = nil, false
      if at and not at[j] then
        st, moved = loads[i](key)
      else
        local raw = raws[at and at[j] or j]
        local g = gcra[i]
        if foreign[key] then
          st = false
        elseif g then
          st = 0
          if raw then
            st, moved = read(raw, now, g[3], g[1], g[2], g[4], g.base)
            st = st or false
          end
        elseif raw then
          st, moved = parse(raw, i)
          st = st or false
        end
      end
      if st == false then
        bad[key], any = true, true
      else
        state[key] = st
        if moved then tier_of[key], order[#order + 1] = i, key end
      end
    end
  end
  return any
end

-- Whether the request whose keys follow index k0 can be decided: false
-- when one of its m keys is unreadable (each such key is reported).
local function readable(k0, m)
  local ok = true
  for j = k0 + 1, k0 + m do
    if bad[KEYS[j]] then ok, bads[#bads + 1] = false, j end
  end
  return ok
end

-- Writes each changed key once (a key of GCRA tier i by `store`, any
-- other by `write(key, state, i)`) and appends the unreadable keys'
-- indices to `out`.
local function finish(out, now, gcra, write)
  for j = 1, #order do
    local key = order[j]
    local i = tier_of[key]
    local g = gcra[i]
    if g then store(key, now, state[key], g[3], g[4]) else write(key, state[key], i) end
  end
  for _, j in ipairs(bads) do out[#out + 1] = j end
  return out
end
