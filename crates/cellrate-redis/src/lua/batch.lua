-- cellrate: what the two batch scripts share (after common.lua, before
-- check.lua or tiers.lua): their arguments, one read of every key, and one
-- write of every changed key.
--
-- KEYS: m per request (request r's tier i is key (r - 1)*m + i).
-- ARGV: m, then `width` numbers per tier, then one cost per request, or a
-- single cost for all of them.
-- Every request is decided in memory at one server time, in order, so a
-- key's state after a request is what the next request of that key reads;
-- a request is admitted iff every tier admits it, and only then charged on
-- every tier. A key that holds nothing its tier can read (another type, or
-- a value its parser refuses) is reported by its index after the values:
-- a request that uses it is not decided (its values are 0) and charges
-- nothing, every other request is decided as if it were absent, and the key
-- is never written.

-- The tiers' numbers (`width` each), m, n and each request's cost; nil
-- when the arguments do not fit the keys.
local function batch_args(width)
  local m = tonumber(ARGV[1])
  local params = {}
  for i = 1, m do
    local p, o = {}, width * (i - 1) + 1
    for w = 1, width do p[w] = tonumber(ARGV[o + w]) end
    params[i] = p
  end
  local first = width * m + 1
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

-- Reads every key once: one MGET, then `parse(raw, i)` for each key of
-- tier i (its state, or false when unreadable; `raw` is nil for an absent
-- key). A key that reads as absent but holds another type is unreadable:
-- one EXISTS when some read as absent, and TYPE only if one of them exists.
local function read_keys(m, parse)
  local raws = call('MGET', unpack(KEYS))
  local absent, foreign = {}, {}
  for j = 1, #KEYS do
    if not raws[j] then absent[#absent + 1] = KEYS[j] end
  end
  if #absent > 0 and call('EXISTS', unpack(absent)) > 0 then
    for _, k in ipairs(absent) do
      if call('TYPE', k)['ok'] ~= 'none' then foreign[k] = true end
    end
  end
  local seen = {}
  for j = 1, #KEYS do
    local key = KEYS[j]
    if not seen[key] then
      seen[key] = true
      local raw, st = raws[j], false
      if raw or not foreign[key] then st = parse(raw, (j - 1) % m + 1) end
      if st == false then bad[key] = true else state[key] = st end
    end
  end
end

-- Writes each changed key once, by `write(key, state, tier)`, and appends
-- the unreadable keys' indices to `out`.
local function finish(out, write)
  for j = 1, #order do
    local key = order[j]
    write(key, state[key], tier_of[key])
  end
  for _, j in ipairs(bads) do out[#out + 1] = j end
  return out
end
