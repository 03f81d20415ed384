-- Unit tests of restysync.requests: the request metrics' checks and
-- labels (recording and the report run in the end-to-end tests, where
-- nginx serves requests).
local t = require "testing"
local requests = require "restysync.requests"

local T = {}

function T.test_valid_bounds()
    t.eq(requests.valid_bounds({ 0.005, 0.01, 1 }), true, "increasing")
    t.eq(requests.valid_bounds({}), false, "empty")
    t.eq(requests.valid_bounds({ 1, 1 }), false, "not increasing")
    t.eq(requests.valid_bounds({ 1, "2" }), false, "a string")
    t.eq(requests.valid_bounds({ 0 / 0 }), false, "NaN")
    t.eq(requests.valid_bounds({ math.huge }), false, "infinite")
    local many = {}
    for i = 1, 65 do
        many[i] = i
    end
    t.eq(requests.valid_bounds(many), false, "65 bounds")
end

function T.test_clean_host_drops_control_characters_and_bounds()
    t.eq(requests.clean_host("a.test\1\2\n"), "a.test", "control characters")
    t.eq(#requests.clean_host(string.rep("a", 300)), 253, "bounded")
    t.eq(requests.clean_host(nil), "", "nil")
end

function T.test_start_refuses_bad_bounds()
    local ok, err = pcall(requests.start, { time = { 1 }, length = { 2, 1 }, size = { 1 } })
    t.eq(ok, false, "start")
    t.contains(err, "length must be 1 to 64 increasing numbers", "reason")
end

function T.test_start_refuses_unknown_skipped_histograms()
    local b = { time = { 1 }, length = { 1 }, size = { 1 } }
    b.skip = { response_duration = true, upstream_secrets = true }
    local ok, err = pcall(requests.start, b)
    t.eq(ok, false, "start")
    t.contains(err, "no histogram upstream_secrets", "reason")
    b.skip = "connect_duration"
    ok, err = pcall(requests.start, b)
    t.eq(ok, false, "start with a string")
    t.contains(err, "skip must be a table", "reason")
end

function T.test_report_without_start_is_empty()
    local body = require("cjson").decode(requests.report())
    t.eq(#body.series, 0, "series")
    t.eq(body.histograms[1], "request_duration", "histograms")
end

return T
