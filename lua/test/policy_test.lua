-- Unit tests of restysync.policy: a backend's balancing policy.
local t = require "testing"
local cjson = require "cjson"
local policy = require "restysync.policy"

local T = {}

function T.test_check_accepts_and_decode_fills_defaults()
    local stored, err = policy.check({ algorithm = "hash", hash_by = "request_uri", hash_subset = 3 }, "p")
    t.eq(err, nil, "err")
    t.eq(cjson.decode(stored), { algorithm = "hash", hash_by = "request_uri", hash_subset = 3 }, "stored")
    local p = policy.decode(stored)
    t.eq(p.tries, policy.DEFAULT_TRIES, "tries")
    t.eq(p.max_fails, policy.DEFAULT_MAX_FAILS, "max_fails")
    t.eq(p.fail_timeout, policy.DEFAULT_FAIL_TIMEOUT, "fail_timeout")
    t.eq(p.canary_weight_total, 100, "canary_weight_total")
end

function T.test_decode_of_nothing_is_round_robin()
    t.eq(policy.decode(nil).algorithm, "round_robin", "algorithm")
    t.eq(policy.decode("not json").algorithm, "round_robin", "algorithm of garbage")
end

function T.test_check_names_the_field()
    local cases = {
        { { algorithm = "random" }, "p.algorithm: " },
        { { algorithm = "hash" }, "p.hash_by: is required with algorithm hash" },
        { { hash_subset = 2 }, "p.hash_subset: is only valid with algorithm hash" },
        { { algorithm = "hash", hash_by = "a b c d e" }, "p.hash_by: must be one to four" },
        { { canary_affinity_legacy = true }, "p.canary_affinity_legacy: is only valid with canary" },
        { { canary = "c", canary_weight = 200 }, "p.canary_weight: is more than canary_weight_total" },
        { { cookie_name = "a;b" }, "p.cookie_name: " },
        { { tries = 0 }, "p.tries: " },
        { { bogus = 1 }, "p.bogus: unknown field" },
        { { canary_header_value = string.rep("x", 513) }, "p.canary_header_value: longer than 512 bytes" },
    }
    for _, c in ipairs(cases) do
        local stored, err = policy.check(c[1], "p")
        t.eq(stored, nil, "stored of " .. cjson.encode(c[1]))
        t.contains(err, c[2], "reason for " .. cjson.encode(c[1]))
    end
    local _, err = policy.check("x", "p")
    t.eq(err, "p: must be an object", "a string")
end

return T
