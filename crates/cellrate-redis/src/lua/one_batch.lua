-- cellrate window check, one tier, several requests (after one.lua, with
-- gcra.lua and batch.lua before this file): one.lua's contract, through
-- batch.lua's reads and writes; the algorithm reads its own keys when it has a
-- `load` (the sliding log), else one MGET reads them all.
local params, m, n, costs = batch_args(4)
if not params or m ~= 1 then return redis.error_reply('cellrate: bad window arguments') end
local p = params[1]
table.remove(p, 1)
local loads = nil
if alg.load then loads = {function(key) return alg.load(key, p, now) end} end
local unreadable = read_keys(now, 1, {}, function(raw) return alg.parse(raw, now, p) end, loads)
local out = {now}
for r = 1, n do
  local key, cost, o = KEYS[r], costs[r], 4 * r - 2
  if unreadable and bad[key] then
    out[o], out[o + 1], out[o + 2], out[o + 3] = 0, 0, 0, 0
    bads[#bads + 1] = r
  else
    local v = alg.view(state[key], now, p)
    local fit, wait = alg.fits(v, cost, p), 0
    if fit then
      if cost > 0 then
        alg.charge(v, cost, p)
        state[key] = v
        if not tier_of[key] then tier_of[key], order[#order + 1] = 1, key end
      end
    else
      wait = alg.wait(v, cost, p)
    end
    out[o] = fit and 1 or 0
    out[o + 1], out[o + 2] = alg.numbers(v, p)
    out[o + 3] = wait
  end
end
return finish(out, now, {}, function(key, st) alg.store(key, st, now, p) end)
