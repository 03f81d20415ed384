-- Unit tests of restysync.gateway and the ordered routes of
-- restysync.routes: a rule's checks, the prefix replacement, the first
-- location whose path holds.
local t = require "testing"
local cjson = require "cjson"
local gateway = require "restysync.gateway"
local routes = require "restysync.routes"

local T = {}

-- A checked rule is stored as it came (false and empty fields left out),
-- so that the agent reads back what it sent.
function T.test_check_rule_keeps_what_it_is_given()
    local rule = {
        case_sensitive = true, method = "POST",
        headers = { { name = "Version", value = "2" }, { name = "Env", value = "^can", regex = true } },
        query = {},
        request_headers = { set = { { name = "X-A", value = "a" } }, remove = { "X-B" } },
        redirect = cjson.null,
        backends = { { backend = "ns/a:80", weight = 3 }, { weight = 1 } },
        route = "HTTPRoute ns/r",
    }
    local got, err = gateway.check_rule(rule, "rule")
    t.eq(err, nil, "err")
    t.eq(got, {
        case_sensitive = true, method = "POST",
        headers = { { name = "Version", value = "2" }, { name = "Env", value = "^can", regex = true } },
        request_headers = { set = { { name = "X-A", value = "a" } }, remove = { "X-B" } },
        backends = { { backend = "ns/a:80", weight = 3 }, { weight = 1 } },
        route = "HTTPRoute ns/r",
    }, "stored rule")
end

function T.test_check_rule_refuses()
    for _, c in ipairs({
        { { redirect = { status = 302 }, rewrite = { host = "a.example.com" } }, "must not both redirect and rewrite" },
        { { rewrite = {} }, "rule.rewrite: rewrites nothing" },
        { { request_headers = {} }, "rule.request_headers: has no change" },
        { { redirect = { path = "/a", matched_prefix = "/b", status = 302 } }, "matched_prefix: only with replace_prefix" },
        { { status = 99 }, "rule.status: must be a whole number from 200 to 599" },
        { { headers = { { name = "X", value = "(", regex = true } } }, "not a regex PCRE compiles" },
    }) do
        local got, err = gateway.check_rule(c[1], "rule")
        t.eq(got, nil, "rule " .. cjson.encode(c[1]))
        t.ok(err and string.find(err, c[2], 1, true), "reason " .. tostring(err) .. ", want " .. c[2])
    end
end

-- The matched prefix is replaced element-wise, never doubling or
-- dropping a "/".
function T.test_replace_prefix()
    local replace = getmetatable(gateway).__index.replace_prefix
    for _, c in ipairs({
        { "/prefix/one/two", "/prefix/one", "/one", "/one/two" },
        { "/strip-prefix/three", "/strip-prefix", "/", "/three" },
        { "/strip-prefix", "/strip-prefix", "/", "/" },
        { "/a/b", "/a/", "/x", "/x/b" },
        { "/a", "/", "/x", "/x/a" },
        { "/a/b", "/a", "/x/", "/x/b" },
        { "/original-prefix/lemon", "/original-prefix", "/replacement-prefix", "/replacement-prefix/lemon" },
    }) do
        t.eq(replace(c[1], c[2], c[3]), c[4], c[1] .. " with " .. c[2] .. " replaced by " .. c[3])
    end
end

-- An ordered route takes the first location whose path holds: a prefix
-- element-wise, a regex case-insensitive unless its rule says otherwise.
function T.test_match_ordered_takes_the_first()
    local r = routes.build(cjson.encode({ https = false, ordered = true, locations = {
        { path = "/a", exact = true, backend = "exact" },
        { path = "/a/b", backend = "longer" },
        { path = "/a/", backend = "a" },
        { path = "^/r/[a-z]+$", regex = true, backend = "sensitive", rule = { case_sensitive = true } },
        { path = "^/i/[a-z]+$", regex = true, backend = "insensitive" },
        { path = "/", backend = "root" },
    } }))
    for _, c in ipairs({
        { "/a", "exact" }, { "/a/", "a" }, { "/a/x", "a" }, { "/a/b", "longer" }, { "/a/bc", "a" },
        { "/ab", "root" }, { "/r/abc", "sensitive" }, { "/r/ABC", "root" }, { "/i/ABC", "insensitive" },
    }) do
        local loc, pattern, err = routes.match_ordered(r, c[1])
        t.eq(err, nil, "err of " .. c[1] .. " (" .. tostring(pattern) .. ")")
        t.eq(loc and loc.backend, c[2], "location of " .. c[1])
    end
    local none = routes.build(cjson.encode({ https = false, ordered = true, locations = { { path = "/x", backend = "x" } } }))
    t.eq(routes.match_ordered(none, "/xy"), nil, "/xy on prefix /x")
end

return T
