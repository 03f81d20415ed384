-- restysync.balancer: round robin over the endpoints the agent pushed.
--
-- Each worker keeps a cache of the backends it has served, keyed by name:
-- { version, endpoints, index }. On every request access() reads only
-- v:<name> from the shared dict; when it differs from the cached version the
-- worker rebuilds that one backend from b:<name>. The peer is picked in the
-- access phase, where a 503 still reaches the client as a 503 (in
-- balancer_by_lua it would turn into a 500), and balance() hands it to nginx.
--
-- log() counts, in the restysync_metrics dict, the requests of each backend
-- (r:<name>) and those that ended in 502, 503 or 504 (f:<name>): no endpoint,
-- none reachable, or a timeout. rebuilds counts the rebuilds of a worker's
-- cached backend. That is one or two dict increments per request, in the log
-- phase, after the response went out; the config API reports them on
-- GET /metrics.

local cjson = require "cjson"
local ngx_balancer = require "ngx.balancer"
local restysync = require "restysync"
local policy = require "restysync.policy"
local canary = require "restysync.canary"

local ngx = ngx
local ngx_var = ngx.var
local ngx_log = ngx.log
local ngx_exit = ngx.exit
local ngx_ERR = ngx.ERR
local ngx_WARN = ngx.WARN
local ngx_INFO = ngx.INFO
local set_current_peer = ngx_balancer.set_current_peer
local set_more_tries = ngx_balancer.set_more_tries
local get_last_failure = ngx_balancer.get_last_failure
local math_min = math.min
local math_random = math.random
local pcall = pcall
local type = type
local tostring = tostring
local string_find = string.find

local _M = { _VERSION = "0.1" }

-- MAX_TRIES bounds how many endpoints one request tries (first try included)
-- when proxy_next_upstream lets nginx retry.
local MAX_TRIES = 3

local HTTP_SERVICE_UNAVAILABLE = 503
local HTTP_INTERNAL_SERVER_ERROR = 500

local json = cjson.new()

-- cache[name] = { version = v, endpoints = { {host=, port=}, ... }, index = i,
--                policy = <restysync.policy.decode> }
local cache = {}

-- build decodes the stored endpoints of one backend. host is in the form
-- set_current_peer wants: IPv6 addresses in brackets.
local function build(version, raw)
    local ok, list = pcall(json.decode, raw)
    if not ok or type(list) ~= "table" then
        return nil, "stored endpoints are not a JSON array: " .. tostring(list)
    end
    local endpoints = {}
    for i = 1, #list do
        local address = list[i].address
        if string_find(address, ":", 1, true) then
            address = "[" .. address .. "]"
        end
        endpoints[i] = { host = address, port = list[i].port }
    end
    local n = #endpoints
    -- A random start keeps the workers from marching in lockstep.
    return { version = version, endpoints = endpoints, index = n > 0 and math_random(n) or 0 }
end

-- backend returns the cached entry for name, rebuilt if its version moved,
-- or nil if the dict holds no such backend.
local function backend(name)
    local d = restysync.dict()
    local version = d:get("v:" .. name)
    if version == nil then
        cache[name] = nil
        return nil
    end
    local entry = cache[name]
    if entry and entry.version == version then
        return entry
    end
    local raw = d:get("b:" .. name)
    if raw == nil then
        cache[name] = nil
        return nil
    end
    local err
    entry, err = build(version, raw)
    if not entry then
        ngx_log(ngx_ERR, "restysync: backend ", name, ": ", err)
        cache[name] = nil
        return nil
    end
    entry.name = name
    entry.policy = policy.decode(d:get("p:" .. name))
    entry.requests_key, entry.failures_key = "r:" .. name, "f:" .. name
    cache[name] = entry
    local m = restysync.metrics_dict()
    if m then
        m:incr("rebuilds", 1, 0)
    end
    return entry
end

-- next_index advances the round robin of entry and returns the new index.
local function next_index(entry)
    local i = entry.index % #entry.endpoints + 1
    entry.index = i
    return i
end

-- access picks the endpoint for this request; call it from
-- access_by_lua_block in every location that proxies to restysync_upstream.
function _M.access()
    local name = ngx_var.restysync_backend
    if not name or name == "" then
        ngx_log(ngx_ERR, "restysync: $restysync_backend is not set in this location")
        return ngx_exit(HTTP_SERVICE_UNAVAILABLE)
    end
    local entry = backend(name)
    if not entry then
        ngx_log(ngx_WARN, "restysync: backend ", name, " is unknown")
        return ngx_exit(HTTP_SERVICE_UNAVAILABLE)
    end
    if entry.policy.canary then
        -- A canary the dict does not hold (yet) leaves the request on the
        -- primary backend.
        local chosen = canary.choose(entry.policy) and backend(entry.policy.canary)
        if chosen then
            entry = chosen
        end
    end
    local ctx = ngx.ctx
    ctx.restysync_entry = entry
    if #entry.endpoints == 0 then
        -- Routine while a service scales from zero: not worth a warning per request.
        ngx_log(ngx_INFO, "restysync: backend ", name, " has no endpoints")
        return ngx_exit(HTTP_SERVICE_UNAVAILABLE)
    end
    ctx.restysync_endpoints = entry.endpoints
    ctx.restysync_index = next_index(entry)
end

-- log counts the request for its backend; call it from log_by_lua_block
-- (at http level: requests that access() did not see are not counted).
function _M.log()
    local entry = ngx.ctx.restysync_entry
    if not entry then
        return
    end
    local m = restysync.metrics_dict()
    if not m then
        return
    end
    m:incr(entry.requests_key, 1, 0)
    local status = ngx.status
    if status >= 502 and status <= 504 then
        m:incr(entry.failures_key, 1, 0)
    end
end

-- balance sets the peer access() picked; call it from balancer_by_lua_block.
-- nginx calls it again for each retry (proxy_next_upstream); a retry goes to
-- the next endpoint of the same list.
function _M.balance()
    local ctx = ngx.ctx
    local endpoints, index = ctx.restysync_endpoints, ctx.restysync_index
    if not endpoints then
        ngx_log(ngx_ERR, "restysync: no endpoint picked; is access_by_lua_block missing?")
        return ngx_exit(HTTP_INTERNAL_SERVER_ERROR)
    end
    local n = #endpoints
    if get_last_failure() == nil then
        if n > 1 then
            local ok, err = set_more_tries(math_min(n, MAX_TRIES) - 1)
            if not ok then
                ngx_log(ngx_ERR, "restysync: set_more_tries: ", err)
            end
        end
    else
        index = index % n + 1
        ctx.restysync_index = index
    end
    local peer = endpoints[index]
    local ok, err = set_current_peer(peer.host, peer.port)
    if not ok then
        ngx_log(ngx_ERR, "restysync: set_current_peer ", peer.host, ":", peer.port, ": ", err)
        return ngx_exit(HTTP_INTERNAL_SERVER_ERROR)
    end
end

-- Private functions, reachable by tests.
setmetatable(_M, { __index = {
    build = build,
    cache = cache,
} })

return _M
