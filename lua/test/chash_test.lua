-- Unit tests of restysync.chash: the consistent-hash ring.
local t = require "testing"
local chash = require "restysync.chash"
local health = require "restysync.health"

local T = {}

local function endpoints(n)
    local list = {}
    for i = 1, n do
        local ep = { host = "10.0.0." .. i, port = 80, key = "10.0.0." .. i .. ":80", index = i }
        health.prepare(ep, "chash-test")
        list[i] = ep
    end
    return list
end

function T.test_ring_is_sorted_and_holds_every_endpoint()
    local ring = chash.build(endpoints(3))
    t.eq(#ring.points, 3 * 160, "points")
    local owners = {}
    for i = 2, #ring.points do
        t.ok(ring.points[i - 1] <= ring.points[i], "points sorted at " .. i)
    end
    for _, ep in ipairs(ring.owners) do
        owners[ep.key] = true
    end
    t.eq(owners, { ["10.0.0.1:80"] = true, ["10.0.0.2:80"] = true, ["10.0.0.3:80"] = true }, "owners")
end

function T.test_same_value_same_endpoint()
    local ring = chash.build(endpoints(5))
    local now = ngx.now()
    for _, v in ipairs({ "/a", "/b", "user-1", "" }) do
        t.eq(chash.pick(ring, v, now), chash.pick(ring, v, now), "pick of " .. v)
    end
end

-- Adding a sixth endpoint moves only values onto it, about 1/6 of them.
function T.test_adding_an_endpoint_moves_values_only_to_it()
    local list = endpoints(6)
    local five = { unpack(list, 1, 5) }
    local before, after = chash.build(five), chash.build(list)
    local now, moved = ngx.now(), 0
    for i = 1, 3000 do
        local v = "value-" .. i
        local a, b = chash.pick(before, v, now), chash.pick(after, v, now)
        if a ~= b then
            moved = moved + 1
            t.eq(b, list[6], "a moved value's new endpoint")
        end
    end
    t.ok(moved > 300 and moved < 700, "moved " .. moved .. " of 3000, want about 500")
end

function T.test_find_wraps()
    t.eq(chash.find({ 10, 20, 30 }, 31), 1, "after the last point")
    t.eq(chash.find({ 10, 20, 30 }, 20), 2, "on a point")
    t.eq(chash.find({ 10, 20, 30 }, 0), 1, "before the first point")
end

-- A position drawn for an endpoint is one that endpoint owns.
function T.test_position_is_owned_by_its_endpoint()
    local list = endpoints(4)
    local ring = chash.build(list)
    for _, ep in ipairs(list) do
        for _ = 1, 50 do
            local pos = chash.position(ring, ep)
            t.eq(chash.owner(ring, pos), ep, "owner of a position of " .. ep.key)
        end
    end
    t.eq(chash.position(ring, { key = "10.9.9.9:80" }), nil, "position of an endpoint not on the ring")
end

function T.test_subset_takes_its_endpoints_in_turn()
    local ring = chash.build(endpoints(6))
    local now, seen = ngx.now(), {}
    for turn = 1, 12 do
        seen[chash.pick_subset(ring, "/x", 3, turn, now)] = true
    end
    local n = 0
    for _ in pairs(seen) do
        n = n + 1
    end
    t.eq(n, 3, "distinct endpoints of one value's subset")
end

return T
