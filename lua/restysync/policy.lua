-- restysync.policy: the balancing policy of one backend, as the agent sends
-- it with the endpoints (model.Policy in Go).
--
-- check() validates a decoded policy object field by field and returns it as
-- canonical JSON, stored under p:<name> beside the endpoints; decode() turns
-- that back into a table with every default filled in, once per rebuild of a
-- worker's cached backend. The defaults live here and in model/policy.go.

local cjson = require "cjson"
local check = require "restysync.check"

local type = type
local pairs = pairs
local tostring = tostring
local math_floor = math.floor
local string_find = string.find
local string_format = string.format
local string_gmatch = string.gmatch
local string_match = string.match

local _M = { _VERSION = "0.1" }

_M.DEFAULT_TRIES = 3
_M.DEFAULT_MAX_FAILS = 3
_M.DEFAULT_FAIL_TIMEOUT = 10

local json = cjson.new()

local function integer(min, max)
    return function(v)
        if type(v) ~= "number" or math_floor(v) ~= v or v < min or v > max then
            return string_format("must be an integer %d..%d", min, max)
        end
    end
end

local function one_of(values)
    return function(v)
        if type(v) ~= "string" or not values[v] then
            return "is not one of the allowed values"
        end
    end
end

local function pattern(p, what)
    return function(v)
        if type(v) ~= "string" or not string_find(v, p) then
            return "must be " .. what
        end
    end
end

local function boolean(v)
    if type(v) ~= "boolean" then
        return "must be true or false"
    end
end

local function backend_name(v)
    return check.name(v, "")
end

-- FIELDS maps each field to its check; the Go side writes nothing else.
local FIELDS = {
    algorithm = one_of({ round_robin = true, ewma = true, hash = true }),
    hash_by = function(v)
        if type(v) ~= "string" or v == "" then
            return "must be nginx variable names separated by spaces"
        end
        local n = 0
        for name in string_gmatch(v .. " ", "([^ ]*) ") do
            n = n + 1
            if n > 4 or not string_match(name, "^[a-z_][a-z0-9_]*$") then
                return "must be one to four nginx variable names separated by spaces"
            end
        end
        return nil
    end,
    hash_subset = integer(1, 1000),
    affinity = one_of({ cookie = true }),
    affinity_mode = one_of({ balanced = true, persistent = true }),
    cookie_name = pattern("^[%w!#$%%&'*+%-.^_`|~]+$", "a cookie name"),
    cookie_max_age = integer(0, 10 * 365 * 24 * 3600),
    cookie_path = pattern("^/[!-:<-~]*$", "a cookie path"),
    cookie_samesite = one_of({ Strict = true, Lax = true, None = true }),
    cookie_secure = boolean,
    cookie_change_on_failure = boolean,
    cookie_conditional_samesite_none = boolean,
    cookie_domain = pattern("^%.?[a-z0-9][a-z0-9%-%.]*$", "a domain name"),
    cookie_expires = integer(0, 10 * 365 * 24 * 3600),
    tries = integer(1, 20),
    max_fails = integer(1, 1000),
    fail_timeout = integer(1, 3600),
    canary = backend_name,
    fallback = backend_name,
    canary_weight = integer(0, 1000000),
    canary_weight_total = integer(1, 1000000),
    canary_header = pattern("^[%w%-_]+$", "a header name"),
    canary_header_value = pattern("^[ -~]*$", "printable ASCII"),
    canary_header_pattern = pattern("^[ -~]+$", "printable ASCII"),
    canary_cookie = pattern("^[%w!#$%%&'*+%-.^_`|~]+$", "a cookie name"),
    canary_affinity_legacy = boolean,
}

-- MAX_STRING bounds every string field.
local MAX_STRING = 512

-- check returns the canonical JSON of policy (found at path), or nil and
-- the reason naming the field.
function _M.check(policy, path)
    if not check.is_object(policy) then
        return nil, path .. ": must be an object"
    end
    for k, v in pairs(policy) do
        local field_check = FIELDS[k]
        if not field_check then
            return nil, path .. "." .. tostring(k) .. ": unknown field"
        end
        if type(v) == "string" and #v > MAX_STRING then
            return nil, string_format("%s.%s: longer than %d bytes", path, k, MAX_STRING)
        end
        local err = field_check(v)
        if err then
            return nil, path .. "." .. k .. ": " .. err
        end
    end
    if policy.algorithm == "hash" and not policy.hash_by then
        return nil, path .. ".hash_by: is required with algorithm hash"
    end
    if policy.hash_subset and policy.algorithm ~= "hash" then
        return nil, path .. ".hash_subset: is only valid with algorithm hash"
    end
    if policy.canary_affinity_legacy ~= nil and not policy.canary then
        return nil, path .. ".canary_affinity_legacy: is only valid with canary"
    end
    if policy.canary_weight and policy.canary_weight > (policy.canary_weight_total or 100) then
        return nil, path .. ".canary_weight: is more than canary_weight_total"
    end
    return json.encode(policy)
end

-- decode returns the stored policy raw (nil: none) with defaults filled in.
function _M.decode(raw)
    local p = {}
    if raw then
        local ok, decoded = pcall(json.decode, raw)
        if ok and type(decoded) == "table" then
            p = decoded
        end
    end
    p.algorithm = p.algorithm or "round_robin"
    p.tries = p.tries or _M.DEFAULT_TRIES
    p.max_fails = p.max_fails or _M.DEFAULT_MAX_FAILS
    p.fail_timeout = p.fail_timeout or _M.DEFAULT_FAIL_TIMEOUT
    p.canary_weight = p.canary_weight or 0
    p.canary_weight_total = p.canary_weight_total or 100
    return p
end

return _M
