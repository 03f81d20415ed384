-- restysync.ewma: peak-EWMA load balancing with two random choices.
--
-- Why: round robin sends a slow endpoint (a busy pod, a cold cache, a far
-- zone) its full share. Peak-EWMA keeps, per endpoint, a moving average of
-- the upstream response time that jumps up at once on a slow response and
-- decays towards faster ones with a time constant of DECAY seconds; the cost
-- of an endpoint is that average times its requests in flight (+1). Each
-- request draws two distinct endpoints at random and takes the cheaper: the
-- random pair keeps workers, which each measure on their own, from all
-- stampeding to the one endpoint they believe fastest.
--
-- The state (ewma, ewma_at, pending) is per worker, in the endpoint's table,
-- so it survives an endpoint push for the endpoints that remain (the
-- balancer carries endpoint tables over by address:port). An endpoint
-- nobody has measured yet costs nothing and is tried first. An idle
-- endpoint's cost decays with time even without traffic, so one that was
-- slow once gets a new chance later. Response times come from
-- $upstream_response_time in the log phase.

local health = require "restysync.health"

local math_exp = math.exp
local math_random = math.random
local tonumber = tonumber
local string_match = string.match

local _M = { _VERSION = "0.1" }

-- DECAY is the time constant of the average, in seconds.
local DECAY = 10

-- A small floor so that requests in flight still count between endpoints
-- that answer in under a millisecond (measured as 0).
local FLOOR = 1e-6

-- prepare gives a new endpoint table its EWMA state; carried-over ones keep it.
function _M.prepare(ep)
    if ep.ewma == nil then
        ep.ewma, ep.ewma_at, ep.pending = 0, 0, 0
    end
end

-- cost of ep at time now: the average decayed to now, times the load.
local function cost(ep, now)
    local e = ep.ewma
    local dt = now - ep.ewma_at
    if e > 0 and dt > 0 then
        e = e * math_exp(-dt / DECAY)
    end
    return (e + FLOOR) * (ep.pending + 1)
end

-- pick draws two distinct endpoints of entry and returns the cheaper
-- usable one (restysync.health).
function _M.pick(entry, now)
    local list = entry.endpoints
    local n = #list
    if n == 1 then
        return list[1]
    end
    local i = math_random(n)
    local j = math_random(n - 1)
    if j >= i then
        j = j + 1
    end
    local a, b = list[i], list[j]
    local ua, ub = health.usable(a, now), health.usable(b, now)
    if ua and ub then
        if cost(b, now) < cost(a, now) then
            return b
        end
        return a
    end
    if ua then
        return a
    end
    if ub then
        return b
    end
    return health.next_usable(list, i, now) or a
end

-- started and finished count the requests in flight to ep.
function _M.started(ep)
    ep.pending = ep.pending + 1
end

function _M.finished(ep)
    if ep.pending > 0 then
        ep.pending = ep.pending - 1
    end
end

-- observe folds the response time of the request's last attempt into ep's
-- average. times is $upstream_response_time: one value per attempt
-- ("0.004", "0.000, 0.012", "-" when none was measured).
function _M.observe(ep, times, now)
    if not times then
        return
    end
    local rtt = tonumber(string_match(times, "([%d.]+)%s*$"))
    if not rtt then
        return
    end
    local e = ep.ewma
    if rtt > e then
        e = rtt -- the peak: a slow response counts in full, at once
    else
        local w = math_exp(-(now - ep.ewma_at) / DECAY)
        e = e * w + rtt * (1 - w)
    end
    ep.ewma, ep.ewma_at = e, now
end

-- Private functions, reachable by tests.
_M.cost = cost

return _M
