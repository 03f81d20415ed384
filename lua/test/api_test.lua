-- Unit tests of restysync.api: who may ask.
local t = require "testing"
local api = require "restysync.api"

local T = {}

-- secret is the agent's secret, which the test's nginx loaded at start:
-- the Go runner sends it with every request, as the agent does (the
-- workers cannot read the file).
local function secret()
    local s = ngx.var.http_x_restysync_secret
    t.eq(type(s) == "string" and #s, 64, "length of the secret the runner sent")
    return s
end

function T.test_secret_matches_only_the_secret()
    local s = secret()
    t.ok(api.secret_matches(s), "the secret")
    t.eq(api.secret_matches(s:sub(1, 63)), false, "one digit short")
    t.eq(api.secret_matches(s .. "0"), false, "one digit more")
    t.eq(api.secret_matches(string.rep("0", 64)), false, "another secret")
    t.eq(api.secret_matches(nil), false, "none")
end

function T.test_refusal()
    local s = secret()
    ngx.req.clear_header("X-Restysync-Secret")
    t.eq(api.refusal("/status", "GET"), nil, "GET /status without a secret")
    t.contains(api.refusal("/backends", "GET"), "X-Restysync-Secret is missing or wrong", "GET /backends without a secret")
    ngx.req.set_header("X-Restysync-Secret", s)
    t.eq(api.refusal("/backends", "POST"), nil, "POST /backends with the secret")
    ngx.req.set_header("X-Request-ID", "r1")
    t.contains(api.refusal("/status", "GET"), "a request from inside nginx", "a proxied request")
    ngx.req.clear_header("X-Request-ID")
end

return T
