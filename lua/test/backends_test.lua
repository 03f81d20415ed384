-- Unit tests of restysync.backends: POST /backends' checks, its writes and
-- the listings.
local t = require "testing"
local cjson = require "cjson"
local backends = require "restysync.backends"

local T = {}

function T.test_addresses()
    for _, a in ipairs({ "10.0.0.1", "0.0.0.0", "255.255.255.255" }) do
        t.ok(backends.is_ipv4(a), a)
    end
    for _, a in ipairs({ "10.0.0.256", "10.0.0", "01.0.0.1", "a.b.c.d", "10.0.0.1 " }) do
        t.eq(backends.is_ipv4(a), false, a)
    end
    for _, a in ipairs({ "::1", "::", "fe80::1", "2001:db8:0:0:0:0:0:1", "::ffff:10.0.0.1", "1:2:3:4:5:6:7::" }) do
        t.ok(backends.is_ipv6(a), a)
    end
    for _, a in ipairs({ ":", "1::2::3", "1:2:3:4:5:6:7:8:9", "fe80::1%eth0", "12345::", "::ffff:10.0.0.256" }) do
        t.eq(backends.is_ipv6(a), false, a)
    end
end

function T.test_check_update_names_the_field()
    local cases = {
        { { upserts = { { name = "b" } } }, "upserts[0].endpoints: is missing" },
        { { upserts = { { name = "b", endpoints = { { address = "10.0.0.1" } } } } }, "upserts[0].endpoints[0].port: must be an integer 1..65535" },
        { { upserts = { { name = "b", endpoints = { { address = "host.test", port = 80 } } } } }, "upserts[0].endpoints[0].address: must be an IPv4 or IPv6 address" },
        { { upserts = { { name = "b", endpoints = { { address = "10.0.0.1", port = 80, weight = 1 } } } } }, "upserts[0].endpoints[0].weight: unknown field" },
        { { upserts = { { name = "b", endpoints = {}, policy = { algorithm = "x" } } } }, "upserts[0].policy.algorithm: " },
        { { upserts = { { name = "b", endpoints = {} }, { name = "b", endpoints = {} } } }, 'upserts[1].name: "b" is also upserts[0]' },
        { { upserts = { { name = "", endpoints = {} } } }, "upserts[0].name: must not be empty" },
        { { bogus = {} }, "bogus: unknown field" },
    }
    for _, c in ipairs(cases) do
        local update, err = backends.check_update(c[1])
        t.eq(update, nil, "update of " .. cjson.encode(c[1]))
        t.contains(err, c[2], "reason for " .. cjson.encode(c[1]))
    end
end

function T.test_check_update_stores_compact_endpoints()
    local update, err = backends.check_update({ upserts = { { name = "b", endpoints = {
        { address = "10.0.0.1", port = 80 }, { address = "::1", port = 8080 } } },
        { name = "none", endpoints = cjson.null } } })
    t.eq(err, nil, "err")
    t.eq(update.upserts[1].endpoints, '[{"address":"10.0.0.1","port":80},{"address":"::1","port":8080}]', "endpoints")
    t.eq(update.upserts[2].endpoints, "[]", "endpoints of null")
end

function T.test_write_list_and_remove()
    local d = t.fresh_dict()
    local m = ngx.shared.restysync_metrics
    local update = assert(backends.check_update({ upserts = {
        { name = "b", endpoints = { { address = "10.0.0.1", port = 80 } }, policy = { algorithm = "ewma" } },
        { name = "a", endpoints = {} },
    } }))
    t.eq(backends.write(d, update), 1, "version")
    t.eq(backends.count(d), 2, "count")
    t.eq(d:get("v:b"), 1, "v:b")
    t.eq(cjson.decode(backends.list(d)), { backends = {
        { name = "a", endpoints = {} },
        { name = "b", endpoints = { { address = "10.0.0.1", port = 80 } }, policy = { algorithm = "ewma" } },
    } }, "list")
    m:set("r:b", 7)
    m:set("f:b", 2)
    t.eq(cjson.decode(backends.counters(d, m)), {
        { name = "a", endpoints = 0, requests = 0, failures = 0 },
        { name = "b", endpoints = 1, requests = 7, failures = 2 },
    }, "counters")
    t.eq(backends.write(d, assert(backends.check_update({ removes = { "b", "gone" } }))), 2, "version of the remove")
    t.eq(backends.count(d), 1, "count after the remove")
    t.eq(d:get("b:b"), nil, "b:b after the remove")
    t.eq(d:get("v:b"), nil, "v:b after the remove")
    t.eq(m:get("r:b"), nil, "r:b after the remove")
end

return T
