-- restysync.backends: the backends in the shared dict, as POST /backends
-- (restysync.api) stores them:
--
--   b:<name>  the endpoints, a compact JSON array of {"address","port"}
--   p:<name>  its policy (restysync.policy), absent for the default one
--   v:<name>  the version at which that backend last changed
--   count     how many b: keys there are
--
-- Workers compare v:<name> with their cached copy on each request (see
-- restysync.balancer), so b:<name> is always written before v:<name>.
-- An update is validated whole before anything is written, and written
-- whole or not at all (restysync.store). The request counters of a removed
-- backend (r:<name>, f:<name> in restysync_metrics, kept by
-- restysync.balancer) are dropped with it.

local cjson = require "cjson"
local restysync = require "restysync"
local check = require "restysync.check"
local policy = require "restysync.policy"
local store = require "restysync.store"

local ipairs = ipairs
local tonumber = tonumber
local type = type
local tostring = tostring
local math_floor = math.floor
local string_find = string.find
local string_match = string.match
local string_sub = string.sub
local string_format = string.format
local table_concat = table.concat

local _M = { _VERSION = "0.1" }

-- Limits of one POST /backends.
local MAX_ENDPOINTS = 10000

local array_length = check.array_length
local is_object = check.is_object
local unknown_field = check.unknown_field

local json = cjson.new()
local json_null = json.null
local json_encode = json.encode

-- Validation -------------------------------------------------------------

local function octet(part)
    if not part or #part > 3 or (#part > 1 and string_sub(part, 1, 1) == "0") then
        return false
    end
    return tonumber(part) <= 255
end

-- is_ipv4 accepts dotted-quad literals without leading zeros.
local function is_ipv4(s)
    local a, b, c, d = string_match(s, "^(%d+)%.(%d+)%.(%d+)%.(%d+)$")
    return a ~= nil and octet(a) and octet(b) and octet(c) and octet(d)
end

-- hex_groups counts the 16-bit groups in a colon-separated run of hex
-- groups, where the last may be a dotted quad (two groups) if v4_tail.
-- It returns nil if s is not such a run.
local function hex_groups(s, v4_tail)
    if s == "" then
        return 0
    end
    local count = 0
    local pos = 1
    while true do
        local colon = string_find(s, ":", pos, true)
        local group = colon and string_sub(s, pos, colon - 1) or string_sub(s, pos)
        if not colon and v4_tail and string_find(group, ".", 1, true) then
            if not is_ipv4(group) then
                return nil
            end
            return count + 2
        end
        if not string_match(group, "^%x%x?%x?%x?$") then
            return nil
        end
        count = count + 1
        if not colon then
            return count
        end
        pos = colon + 1
    end
end

-- is_ipv6 accepts RFC 4291 text forms without zone: full, "::"-compressed,
-- and with an embedded IPv4 tail.
local function is_ipv6(s)
    if #s < 2 or #s > 45 then
        return false
    end
    local head, tail = string_match(s, "^(.-)::(.*)$")
    if head then
        if string_find(tail, "::", 1, true) then
            return false
        end
        local h, t = hex_groups(head, false), hex_groups(tail, true)
        return h ~= nil and t ~= nil and h + t <= 7
    end
    return hex_groups(s, true) == 8
end

local function is_port(v)
    return type(v) == "number" and v >= 1 and v <= 65535 and math_floor(v) == v
end

local BACKEND_FIELDS = { name = true, endpoints = true, policy = true }
local ENDPOINT_FIELDS = { address = true, port = true }

-- endpoint_at names endpoint i (from 1) of the backend at at in a message:
-- built only on a fault, as a push of 50,000 backends has 100,000 endpoints.
local function endpoint_at(at, i)
    return string_format("%s.endpoints[%d]", at, i - 1)
end

-- check_endpoints validates the endpoints of the backend at at and returns
-- them as the compact JSON array stored under b:<name>, or nil and the
-- reason.
local function check_endpoints(endpoints, at)
    if endpoints == json_null then
        return "[]" -- a Go nil slice: no endpoints
    end
    local n = array_length(endpoints)
    if not n then
        return nil, at .. ".endpoints: must be an array"
    end
    if n > MAX_ENDPOINTS then
        return nil, string_format("%s.endpoints: has %d endpoints, more than %d", at, n, MAX_ENDPOINTS)
    end
    local parts = {}
    for i = 1, n do
        local ep = endpoints[i]
        if not is_object(ep) then
            return nil, endpoint_at(at, i) .. ": must be an object"
        end
        local extra = unknown_field(ep, ENDPOINT_FIELDS)
        if extra then
            return nil, endpoint_at(at, i) .. "." .. tostring(extra) .. ": unknown field"
        end
        local address, port = ep.address, ep.port
        if type(address) ~= "string" or not (is_ipv4(address) or is_ipv6(address)) then
            return nil, endpoint_at(at, i) .. ".address: must be an IPv4 or IPv6 address"
        end
        if not is_port(port) then
            return nil, endpoint_at(at, i) .. ".port: must be an integer 1..65535"
        end
        -- address holds only hex digits, '.' and ':', so it needs no escaping.
        parts[i] = string_format('{"address":"%s","port":%d}', address, port)
    end
    return "[" .. table_concat(parts, ",") .. "]"
end

-- check_update validates a decoded POST /backends body. It returns
-- { upserts = { {name=, endpoints=<json>}, ... }, removes = { name, ... } }
-- or nil and the reason, naming the field.
local function check_update(body)
    return check.update(body, BACKEND_FIELDS, function(b, at)
        if b.endpoints == nil then
            return nil, at .. ".endpoints: is missing"
        end
        local endpoints, err = check_endpoints(b.endpoints, at)
        if not endpoints then
            return nil, err
        end
        local stored_policy
        if b.policy ~= nil and b.policy ~= json_null then
            stored_policy, err = policy.check(b.policy, at .. ".policy")
            if not stored_policy then
                return nil, err
            end
        end
        return { name = b.name, endpoints = endpoints, policy = stored_policy }
    end)
end

-- Storage ----------------------------------------------------------------

-- write stores a checked update. It returns the new version, or nil, the
-- HTTP status and the reason. It must not yield: it runs under the lock.
-- b:<name> is written before v:<name>, the stamp workers cache by.
local function write(d, update)
    local version = store.next_version(d)
    local count = d:get("count") or 0

    -- Each write is { key, value }; a nil value deletes the key.
    local writes = {}
    for _, name in ipairs(update.removes) do
        if d:get("b:" .. name) ~= nil then
            count = count - 1
        end
        writes[#writes + 1] = { "v:" .. name, stamp = true }
        writes[#writes + 1] = { "b:" .. name }
        writes[#writes + 1] = { "p:" .. name }
    end
    for _, b in ipairs(update.upserts) do
        local key = "b:" .. b.name
        local old = d:get(key)
        if old == nil then
            count = count + 1
        end
        writes[#writes + 1] = { key, b.endpoints, read = true, old = old }
        writes[#writes + 1] = { "p:" .. b.name, b.policy }
        writes[#writes + 1] = { "v:" .. b.name, version, stamp = true }
    end
    writes[#writes + 1] = { "count", count }
    writes[#writes + 1] = { "version", version }
    local stored, status, reason = store.apply(d, writes, version, "backends")
    local m = restysync.metrics_dict()
    if stored and m then
        for _, name in ipairs(update.removes) do
            m:delete("r:" .. name)
            m:delete("f:" .. name)
        end
    end
    return stored, status, reason
end

-- Listing ----------------------------------------------------------------

-- list is the body of GET /backends: every backend with its endpoints and
-- policy, sorted by name.
local function list(d)
    local parts = {}
    for _, name in ipairs(store.names(d, "b:")) do
        local endpoints = d:get("b:" .. name)
        if endpoints then
            local stored_policy = d:get("p:" .. name)
            parts[#parts + 1] = '{"name":' .. json_encode(name) .. ',"endpoints":' .. endpoints
                .. (stored_policy and (',"policy":' .. stored_policy) or "") .. "}"
        end
    end
    return '{"backends":[' .. table_concat(parts, ",") .. "]}"
end

-- count_endpoints counts the endpoints of a stored b:<name> value without
-- decoding it: each endpoint is one JSON object.
local function count_endpoints(raw)
    local n, pos = 0, 1
    while true do
        pos = string_find(raw, "{", pos, true)
        if not pos then
            return n
        end
        n = n + 1
        pos = pos + 1
    end
end

-- counters is the "backends" array of GET /metrics: per backend, sorted by
-- name, how many endpoints it has and the request counters m (the
-- restysync_metrics dict, nil when nginx.conf has none) holds for it.
local function counters(d, m)
    local parts = {}
    for _, name in ipairs(store.names(d, "b:")) do
        local endpoints = d:get("b:" .. name)
        if endpoints then
            local requests, failures = 0, 0
            if m then
                requests = m:get("r:" .. name) or 0
                failures = m:get("f:" .. name) or 0
            end
            parts[#parts + 1] = string_format('{"name":%s,"endpoints":%d,"requests":%d,"failures":%d}',
                json_encode(name), count_endpoints(endpoints), requests, failures)
        end
    end
    return "[" .. table_concat(parts, ",") .. "]"
end

local function count(d)
    return d:get("count") or 0
end

_M.check_update = check_update
_M.write = write
_M.list = list
_M.counters = counters
_M.count = count

-- Private functions, reachable by tests.
setmetatable(_M, { __index = {
    is_ipv4 = is_ipv4,
    is_ipv6 = is_ipv6,
} })

return _M
