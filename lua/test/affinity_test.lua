-- Unit tests of restysync.affinity: the cookie's format and parsing.
local t = require "testing"
local affinity = require "restysync.affinity"
local health = require "restysync.health"

local T = {}

local function entry(name, mode)
    local list = {}
    for i = 1, 3 do
        local ep = { host = "10.0.2." .. i, port = 80, key = "10.0.2." .. i .. ":80", index = i }
        health.prepare(ep, name)
        list[i] = ep
    end
    local e = { name = name, endpoints = list }
    affinity.prepare(e, { affinity = "cookie", affinity_mode = mode, cookie_name = "route",
        cookie_path = "/app", cookie_max_age = 60, cookie_samesite = "Lax", cookie_secure = true })
    return e
end

function T.test_parse()
    t.eq({ affinity.parse("0badcafe.1234abcd") }, { "0badcafe", "1234abcd" }, "pin and tag")
    t.eq({ affinity.parse("0123456789abcdef") }, { "0123456789abcdef" }, "an old persistent pin without tag")
    t.eq(affinity.parse("not a pin"), nil, "not a pin")
    t.eq(affinity.parse("0bad.12"), nil, "a short tag")
end

-- The tag is the backend's name up to its canary part.
function T.test_tag_leaves_out_the_canary_part()
    t.eq(affinity.tag("b@ns/ing+ns/canary"), affinity.tag("b@ns/ing"), "tag of a split variant")
    t.eq(#affinity.tag("b@ns/ing"), 8, "tag length")
    t.ok(affinity.tag("a") ~= affinity.tag("b"), "tags of two names differ")
end

function T.test_balanced_cookie_names_a_position_its_endpoint_owns()
    local e = entry("b@ns/balanced", "balanced")
    local ep = e.endpoints[2]
    affinity.pin(e, ep)
    local cookie = ngx.header["Set-Cookie"]
    ngx.header["Set-Cookie"] = nil
    local pin, tag, attrs = string.match(cookie, "^route=(%x+)%.(%x+)(;.*)$")
    t.ok(pin, "cookie " .. tostring(cookie))
    t.eq(#pin, 8, "balanced pin length")
    t.eq(tag, affinity.tag("b@ns/balanced"), "tag")
    t.eq(attrs, "; Path=/app; Max-Age=60; SameSite=Lax; Secure; HttpOnly", "attributes")
    local chash = require "restysync.chash"
    t.eq(chash.owner(e.ring, tonumber(pin, 16)), ep, "owner of the pin")
end

function T.test_persistent_cookie_is_the_same_for_an_endpoint()
    local e = entry("b@ns/persistent", "persistent")
    local ep = e.endpoints[3]
    affinity.pin(e, ep)
    local first = ngx.header["Set-Cookie"]
    affinity.pin(entry("b@ns/persistent", "persistent"), { key = ep.key })
    local second = ngx.header["Set-Cookie"]
    ngx.header["Set-Cookie"] = nil
    local pin = string.match(first, "^route=(%x+)%.")
    t.eq(#pin, 16, "persistent pin length")
    t.eq(e.by_cookie[pin], ep, "endpoint of the pin")
    t.eq(second, first, "cookie of the same address in a new entry")
end

function T.test_samesite_none_compatible()
    t.ok(affinity.samesite_none_compatible(nil), "no User-Agent")
    t.ok(affinity.samesite_none_compatible("Mozilla/5.0 Chrome/120.0"), "Chrome 120")
    t.eq(affinity.samesite_none_compatible("Mozilla/5.0 Chrome/60.0"), false, "Chrome 60")
    t.eq(affinity.samesite_none_compatible("Mozilla/5.0 (iPhone; CPU iPhone OS 12_0 like Mac OS X)"), false, "iOS 12")
end

return T
