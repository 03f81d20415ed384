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
        { { timeout_ms = 0 }, "rule.timeout_ms: must be a whole number from 1 to 86400000" },
        { { timeout_ms = 0.5 }, "rule.timeout_ms: must be a whole number" },
        { { backends = { { weight = 1, request_headers = { set = { { name = "X", value = "a\r\nB: c" } } } } } },
            "rule.backends[0].request_headers.set[0].value: must not contain control characters" },
        { { backends = { { weight = 1, request_headers = { set = { { name = "X:", value = "a" } } } } } },
            "must be an HTTP header name" },
        { { cors = { allow_origins = { "https://a.com\r\nX: y" }, max_age = 5 } }, "must be a lower-case origin" },
        { { cors = { allow_origins = { "https://a.com/path" }, max_age = 5 } }, "must be a lower-case origin" },
        { { cors = { allow_origins = { "HTTPS://A.COM" }, max_age = 5 } }, "must be a lower-case origin" },
        { { cors = { allow_origins = { "*", "https://a.com" }, max_age = 5 } }, '"*" must be the only entry' },
        { { cors = { allow_methods = { "GET;" }, max_age = 5 } }, "must be an HTTP method" },
        { { cors = { allow_headers = { "x a" }, max_age = 5 } }, "must be an HTTP header name" },
        { { cors = { max_age = 0 } }, "rule.cors.max_age" },
        { { cors = { max_age = 5, evil = 1 } }, "rule.cors.evil: unknown field" },
        { { backends = { { backend = "ns/a:443", weight = 1, tls = "@restysync_p_0123" } } },
            "rule.backends[0].tls: not the name of a backend TLS location" },
        { { backends = { { backend = "ns/a:443", weight = 1, tls = "@restysync_btls_0123456789abcdef01234567; x" } } },
            "rule.backends[0].tls: not the name of a backend TLS location" },
        { { backends = { { backend = "ns/a:443", weight = 1, tls = 1 } } }, "rule.backends[0].tls: not the name" },
        { { retry = { attempts = 0 } }, "rule.retry.attempts: must be a whole number from 1 to 10" },
        { { retry = { attempts = 11 } }, "rule.retry.attempts: must be a whole number from 1 to 10" },
        { { retry = { codes = { 500 } } }, "rule.retry.attempts: must be a whole number" },
        { { retry = { attempts = 1, codes = { 418 } } }, "rule.retry.codes[0]: must be one of 403, 404, 429" },
        { { retry = { attempts = 1, codes = { 503, 500 } } }, "rule.retry.codes[1]: the codes must be sorted, each once" },
        { { retry = { attempts = 1, codes = { 500, 500 } } }, "rule.retry.codes[1]: the codes must be sorted, each once" },
        { { retry = { attempts = 1, codes = { "500;" } } }, "rule.retry.codes[0]: must be a whole number" },
        { { retry = { attempts = 1, backoff = "1s" } }, "rule.retry.backoff: unknown field" },
        { { mirrors = { { backend = "ns/a:80\nns/b:80", numerator = 1, denominator = 1 } } },
            "rule.mirrors[0].backend: must not contain control characters" },
        { { mirrors = { { backend = "", numerator = 1, denominator = 1 } } }, "rule.mirrors[0].backend: must not be empty" },
        { { mirrors = { { numerator = 1, denominator = 1 } } }, "rule.mirrors[0].backend: must be a string" },
        { { mirrors = { { backend = "a", numerator = 0, denominator = 1 } } }, "rule.mirrors[0].numerator: must be a whole number from 1 to 1" },
        { { mirrors = { { backend = "a", numerator = 3, denominator = 2 } } }, "rule.mirrors[0].numerator: must be a whole number from 1 to 2" },
        { { mirrors = { { backend = "a", numerator = 1, denominator = 0 } } }, "rule.mirrors[0].denominator" },
        { { mirrors = { { backend = "a", numerator = 1, denominator = 2 ^ 31 } } }, "rule.mirrors[0].denominator" },
        { { mirrors = { { backend = "a", numerator = 1, denominator = 1, url = "http://127.0.0.1/" } } },
            "rule.mirrors[0].url: unknown field" },
        { { mirrors = "a" }, "rule.mirrors: must be an array" },
    }) do
        local got, err = gateway.check_rule(c[1], "rule")
        t.eq(got, nil, "rule " .. cjson.encode(c[1]))
        t.ok(err and string.find(err, c[2], 1, true), "reason " .. tostring(err) .. ", want " .. c[2])
    end
end

-- A share's backend TLS location is stored as it came.
function T.test_check_rule_backend_tls()
    local rule = { backends = { { backend = "ns/a:443", weight = 1, tls = "@restysync_btls_0123456789abcdef01234567" } } }
    local got, err = gateway.check_rule(rule, "rule")
    t.eq(err, nil, "err")
    t.eq(got, rule, "stored rule")
end

-- Timeouts, backend header edits and CORS are stored as they came.
function T.test_check_rule_timeouts_backend_headers_cors()
    local rule = {
        timeout_ms = 500,
        backends = { { backend = "ns/a:80", weight = 1, request_headers = { set = { { name = "Backend", value = "a" } } } } },
        cors = { allow_origins = { "https://*.bar.com", "https://www.foo.com:8443" }, allow_methods = { "*" },
            allow_headers = { "x-a" }, allow_credentials = true, max_age = 5 },
    }
    local got, err = gateway.check_rule(cjson.decode(cjson.encode(rule)), "rule")
    t.eq(err, nil, "err")
    t.eq(got, rule, "stored rule")
end

-- A retry is stored as it came; building it gives its tries and the
-- Gateway server's location of its codes (model.RetryLocation's name).
function T.test_check_rule_retry()
    local rule = { retry = { attempts = 3, codes = { 429, 500, 503 } } }
    local got, err = gateway.check_rule(cjson.decode(cjson.encode(rule)), "rule")
    t.eq(err, nil, "err")
    t.eq(got, rule, "stored rule")
    local built = gateway.build_rule(got)
    t.eq(built.retry.tries, 4, "tries")
    t.eq(built.retry.location, "@restysync_retry_429_500_503", "location")
    built = gateway.build_rule(gateway.check_rule({ retry = { attempts = 1 } }, "rule"))
    t.eq(built.retry.tries, 2, "tries without codes")
    t.eq(built.retry.location, nil, "no location without codes")
end

-- Mirrors are stored as they came; more than the Gateway servers' named
-- locations send are refused.
function T.test_check_rule_mirrors()
    local rule = { mirrors = { { backend = "ns/a:80", numerator = 1, denominator = 1 },
        { backend = "ns/b:8080", numerator = 25, denominator = 50 } } }
    local got, err = gateway.check_rule(cjson.decode(cjson.encode(rule)), "rule")
    t.eq(err, nil, "err")
    t.eq(got, rule, "stored rule")
    local many = { mirrors = {} }
    for i = 1, gateway.MAX_MIRRORS + 1 do
        many.mirrors[i] = { backend = "ns/a:80", numerator = 1, denominator = 1 }
    end
    got, err = gateway.check_rule(many, "rule")
    t.eq(got, nil, "17 mirrors")
    t.ok(err and string.find(err, "rule.mirrors: has 17 entries, more than 16", 1, true), "reason " .. tostring(err))
end

-- Each mirror is drawn on its own, by its share; mirror_backend finds
-- the i-th of what was drawn.
function T.test_mirror_backends()
    local rule = { mirrors = { { backend = "all", numerator = 2, denominator = 2 },
        { backend = "fifth", numerator = 1, denominator = 5 }, { backend = "also", numerator = 100, denominator = 100 } } }
    local fifth, n = 0, 1000
    for _ = 1, n do
        local names, count = gateway.mirror_backends(rule)
        if count == 3 then
            t.eq(names, "all\nfifth\nalso", "names")
            fifth = fifth + 1
        else
            t.eq({ names, count }, { "all\nalso", 2 }, "names without fifth")
        end
    end
    t.ok(fifth > 140 and fifth < 260, "fifth drawn " .. fifth .. " times of " .. n)
    t.eq({ gateway.mirror_backends({ mirrors = { { backend = "x", numerator = 1, denominator = 2 ^ 31 - 1 } } }) }, {}, "almost never")
    for i, want in ipairs({ "all", "fifth", "also", false }) do
        t.eq(gateway.mirror_backend("all\nfifth\nalso", i) or false, want, "backend " .. i)
    end
end

-- A "*" of an allowed origin's host is greedy to the left, over dots.
function T.test_origin_allowed()
    local allowed = getmetatable(gateway).__index.origin_allowed
    local cors = { allow_origins = { "https://www.foo.com", "https://*.bar.com", "http://*:8080" } }
    for _, c in ipairs({
        { "https://www.foo.com", true }, { "HTTPS://WWW.FOO.COM", true }, { "http://www.foo.com", false },
        { "https://www.bar.com", true }, { "https://xpto.www.bar.com", true }, { "https://bar.com", false },
        { "https://foobar.com", false }, { "https://.bar.com", false }, { "https://www.bar.com:8443", false },
        { "http://a.example:8080", true }, { "http://a.example", false },
    }) do
        t.eq(allowed(cors, c[1]), c[2], c[1])
    end
    t.eq(allowed({ any_origin = true }, "https://x.y"), true, "*")
    t.eq(allowed({}, "https://x.y"), false, "no origins")
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
