-- Unit tests of restysync.ewma: peak-EWMA scores.
local t = require "testing"
local ewma = require "restysync.ewma"
local health = require "restysync.health"

local T = {}

local function endpoint(i)
    local ep = { host = "10.0.1." .. i, port = 80, key = "10.0.1." .. i .. ":80", index = i }
    health.prepare(ep, "ewma-test")
    ewma.prepare(ep)
    return ep
end

function T.test_a_slow_response_counts_at_once()
    local ep = endpoint(1)
    ewma.observe(ep, "0.500", 100)
    t.eq(ep.ewma, 0.5, "ewma after one slow response")
end

function T.test_faster_responses_decay_the_average()
    local ep = endpoint(1)
    ewma.observe(ep, "1.000", 100)
    ewma.observe(ep, "0.000", 110) -- one time constant later
    t.ok(math.abs(ep.ewma - math.exp(-1)) < 1e-9, "ewma " .. ep.ewma .. ", want 1/e")
end

function T.test_observe_takes_the_last_attempt()
    local ep = endpoint(1)
    ewma.observe(ep, "0.100, 0.300", 100)
    t.eq(ep.ewma, 0.3, "ewma")
    ewma.observe(ep, "-", 101)
    t.eq(ep.ewma, 0.3, "ewma after an unmeasured response")
    ewma.observe(ep, nil, 102)
    t.eq(ep.ewma, 0.3, "ewma without times")
end

function T.test_requests_in_flight_raise_the_cost()
    local ep = endpoint(1)
    ewma.observe(ep, "0.010", 100)
    local idle = ewma.cost(ep, 100)
    ewma.started(ep)
    t.ok(ewma.cost(ep, 100) > idle, "cost with one request in flight")
    ewma.finished(ep)
    ewma.finished(ep) -- never below zero
    t.eq(ep.pending, 0, "pending")
end

function T.test_pick_prefers_the_cheaper_of_two()
    local fast, slow = endpoint(1), endpoint(2)
    local now = ngx.now()
    ewma.observe(fast, "0.001", now)
    ewma.observe(slow, "2.000", now)
    local entry = { endpoints = { fast, slow } }
    for _ = 1, 20 do
        t.eq(ewma.pick(entry, now), fast, "pick")
    end
end

return T
