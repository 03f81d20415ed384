-- restysync.balancer: picks the endpoint of every proxied request.
--
-- Each worker keeps a cache of the backends it has served, keyed by name:
-- an entry with the endpoints, the decoded policy and what its algorithm
-- needs. On every request access() reads only v:<name> from the shared dict;
-- when it differs from the cached version the worker rebuilds that one
-- backend from b:<name> and p:<name>. A rebuild carries over the table of
-- every endpoint that remains (by address:port), and with it the state kept
-- there: EWMA scores, hash ring points, the cookie id, passive health.
--
-- The peer is picked in the access phase, where a 503 still reaches the
-- client as a 503 (in balancer_by_lua it would turn into a 500): by
-- access() in a location that names its backend in $restysync_backend (a
-- profile), by access_backend() for the location restysync.router picked.
-- balance() hands it to nginx. The policy decides how:
--
--   algorithm   round_robin (here), ewma (restysync.ewma), hash by an nginx
--               variable (restysync.chash), onto one endpoint or, with
--               hash_subset, onto a subset taken in turn;
--   affinity    "cookie": a client's cookie pins its endpoint
--               (restysync.affinity), balanced or persistent;
--   canary      the backend that takes part of the traffic
--               (restysync.canary); unless canary_affinity_legacy, a
--               client the affinity cookie pins to the backend or to its
--               canary goes there first, as ingress-nginx's sticky
--               affinity-canary-behavior;
--   fallback    the backend that answers while this one has no endpoints
--               (annotation default-backend);
--   tries       endpoints one request tries, the first included, on the
--               failures the location's proxy_next_upstream names ("error
--               timeout" unless the annotation proxy-next-upstream says
--               more, such as http_502; "off": never). nginx itself never
--               retries a request already sent unless it is idempotent or
--               proxy_next_upstream holds non_idempotent, and leaves
--               proxy_next_upstream_tries at 0, so that set_more_tries
--               alone bounds the tries;
--   max_fails, fail_timeout
--               passive health (restysync.health): endpoints that keep
--               failing are skipped for a while, never to the point of a 503.
--
-- log() has restysync.requests record the request for the request metrics
-- (worker memory only), and counts, in the restysync_metrics dict, the requests of each backend
-- (r:<name>) and those that ended in 502, 503 or 504 (f:<name>): no endpoint,
-- none reachable, or a timeout. rebuilds counts the rebuilds of a worker's
-- cached backend. That is one or two dict increments per request, in the log
-- phase, after the response went out; the config API reports them on
-- GET /metrics. For EWMA backends log() also feeds the response time to the
-- average, and a request that failed on its last attempt counts as a
-- failure of that endpoint.

local cjson = require "cjson"
local ngx_balancer = require "ngx.balancer"
local restysync = require "restysync"
local policy = require "restysync.policy"
local canary = require "restysync.canary"
local health = require "restysync.health"
local ewma = require "restysync.ewma"
local chash = require "restysync.chash"
local affinity = require "restysync.affinity"
local requests = require "restysync.requests"

local ngx = ngx
local ngx_var = ngx.var
local ngx_log = ngx.log
local ngx_exit = ngx.exit
local ngx_now = ngx.now
local ngx_ERR = ngx.ERR
local ngx_WARN = ngx.WARN
local ngx_INFO = ngx.INFO
local set_current_peer = ngx_balancer.set_current_peer
local set_more_tries = ngx_balancer.set_more_tries
local get_last_failure = ngx_balancer.get_last_failure
local set_timeouts = ngx_balancer.set_timeouts
local usable = health.usable
local record = requests.record
local math_min = math.min
local math_random = math.random
local pcall = pcall
local type = type
local tostring = tostring
local string_find = string.find
local string_match = string.match
local string_gmatch = string.gmatch

local _M = { _VERSION = "0.1" }

local HTTP_SERVICE_UNAVAILABLE = 503
local HTTP_INTERNAL_SERVER_ERROR = 500

local json = cjson.new()

-- cache[name] = entry:
--   version, name, policy      the stored version and decoded policy
--   endpoints = { ep, ... }    ep = { host=, port=, key="host:port", index=i, ... }
--   by_key = { [key] = ep }    what the next rebuild carries over
--   pick = function(entry, now) -> ep, by the policy's algorithm
--   index                      round robin position
--   ring, hash_var(s)          consistent hashing (restysync.chash), and
--                              the positions of balanced affinity cookies
--   subset                     hash_subset: the endpoints a value maps to
--   ewma                       true for EWMA (restysync.ewma)
--   affinity                   true for cookie affinity (restysync.affinity)
local cache = {}

-- pick_round_robin takes the next usable endpoint in turn.
local function pick_round_robin(entry, now)
    local list = entry.endpoints
    local i = entry.index % #list + 1
    entry.index = i
    local ep = list[i]
    if usable(ep, now) then
        return ep
    end
    ep = health.next_usable(list, i, now) or ep
    entry.index = ep.index or i
    return ep
end

local function pick_hash(entry, now)
    return chash.pick(entry.ring, ngx_var[entry.hash_var] or "", now)
end

-- pick_hash_many hashes the values of several variables, concatenated.
local function pick_hash_many(entry, now)
    local vars, key = entry.hash_vars, ""
    for i = 1, #vars do
        key = key .. (ngx_var[vars[i]] or "")
    end
    return chash.pick(entry.ring, key, now)
end

-- pick_hash_subset takes the value's subset of endpoints in turn.
local function pick_hash_subset(entry, now)
    local key = entry.hash_var and (ngx_var[entry.hash_var] or "")
    if not key then
        local vars = entry.hash_vars
        key = ""
        for i = 1, #vars do
            key = key .. (ngx_var[vars[i]] or "")
        end
    end
    local turn = entry.index + 1
    entry.index = turn
    return chash.pick_subset(entry.ring, key, entry.subset, turn, now)
end

-- build decodes the stored endpoints (raw) and policy (raw_policy) of
-- backend name. Endpoint tables of prev (the entry it replaces) whose
-- address:port remains are reused. host is in the form set_current_peer
-- wants: IPv6 addresses in brackets.
local function build(name, version, raw, raw_policy, prev)
    local ok, list = pcall(json.decode, raw)
    if not ok or type(list) ~= "table" then
        return nil, "stored endpoints are not a JSON array: " .. tostring(list)
    end
    local old = prev and prev.by_key or {}
    local endpoints, by_key = {}, {}
    for i = 1, #list do
        local host, port = list[i].address, list[i].port
        if string_find(host, ":", 1, true) then
            host = "[" .. host .. "]"
        end
        local key = host .. ":" .. port
        local ep = old[key] or { host = host, port = port, key = key }
        ep.index = i
        health.prepare(ep, name)
        endpoints[i], by_key[key] = ep, ep
    end
    local n = #endpoints
    local p = policy.decode(raw_policy)
    local entry = {
        version = version,
        name = name,
        policy = p,
        endpoints = endpoints,
        by_key = by_key,
        -- A random start keeps the workers from marching in lockstep.
        index = n > 0 and math_random(n) or 0,
        pick = pick_round_robin,
        version_key = "v:" .. name,
        requests_key = "r:" .. name,
        failures_key = "f:" .. name,
    }
    if n == 0 then
        return entry
    end
    if p.algorithm == "hash" and p.hash_by then
        entry.ring = chash.build(endpoints)
        local vars = {}
        for name in string_gmatch(p.hash_by, "[^ ]+") do
            vars[#vars + 1] = name
        end
        if #vars == 1 then
            entry.hash_var = vars[1]
            entry.pick = pick_hash
        else
            entry.hash_vars = vars
            entry.pick = pick_hash_many
        end
        if p.hash_subset then
            entry.subset = p.hash_subset
            entry.pick = pick_hash_subset
        end
    elseif p.algorithm == "ewma" then
        for i = 1, n do
            ewma.prepare(endpoints[i])
        end
        entry.ewma = true
        entry.pick = ewma.pick
    end
    if p.affinity == "cookie" and p.cookie_name then
        affinity.prepare(entry, p)
        entry.affinity = true
    end
    return entry
end

-- backend returns the cached entry for name, rebuilt if its version moved,
-- or nil if the dict holds no such backend. The cached entry keeps the
-- name of its version key, so a request makes no new string.
local function backend(name)
    local d = restysync.dict()
    local entry = cache[name]
    local version = d:get(entry and entry.version_key or "v:" .. name)
    if version == nil then
        cache[name] = nil
        return nil
    end
    if entry and entry.version == version then
        return entry
    end
    local raw = d:get("b:" .. name)
    if raw == nil then
        cache[name] = nil
        return nil
    end
    local err
    entry, err = build(name, version, raw, d:get("p:" .. name), entry)
    if not entry then
        ngx_log(ngx_ERR, "restysync: backend ", name, ": ", err)
        cache[name] = nil
        return nil
    end
    cache[name] = entry
    local m = restysync.metrics_dict()
    if m then
        m:incr("rebuilds", 1, 0)
    end
    return entry
end

-- access_backend picks the endpoint of backend name for this request;
-- restysync.router calls it for a location it routed to a backend, with
-- the location's request metric labels (nil: none, or metrics off).
local function access_backend(name, metric)
    local ctx = ngx.ctx
    if metric then
        ctx.restysync_metric = metric
    end
    local entry = backend(name)
    if not entry then
        ngx_log(ngx_WARN, "restysync: backend ", name, " is unknown")
        return ngx_exit(HTTP_SERVICE_UNAVAILABLE)
    end
    local p = entry.policy
    if p.canary then
        -- A canary the dict does not hold (yet) leaves the request on the
        -- primary backend.
        local target = backend(p.canary)
        if target then
            local pinned = entry.affinity and not p.canary_affinity_legacy and affinity.pinned_to(entry, target)
            if pinned then
                entry = pinned
            elseif canary.choose(p) then
                entry = target
            end
            if entry == target then
                -- The request metrics' canary label.
                ctx.restysync_canary = p.canary
            end
        end
    end
    if #entry.endpoints == 0 and entry.policy.fallback then
        -- default-backend: it answers while this backend has no endpoints.
        local fallback = backend(entry.policy.fallback)
        if fallback and #fallback.endpoints > 0 then
            entry = fallback
        end
    end
    ctx.restysync_entry = entry
    if #entry.endpoints == 0 then
        -- Routine while a service scales from zero: not worth a warning per request.
        ngx_log(ngx_INFO, "restysync: backend ", name, " has no endpoints")
        return ngx_exit(HTTP_SERVICE_UNAVAILABLE)
    end
    local now = ngx_now()
    local ep
    if entry.affinity then
        ep = affinity.pinned(entry)
        if not ep or not usable(ep, now) then
            ep = entry.pick(entry, now)
            affinity.pin(entry, ep)
        end
    else
        ep = entry.pick(entry, now)
    end
    ctx.restysync_peer = ep
end

-- access picks the endpoint for this request; call it from
-- access_by_lua_block in every location that proxies to restysync_upstream.
function _M.access()
    local name = ngx_var.restysync_backend
    if not name or name == "" then
        ngx_log(ngx_ERR, "restysync: $restysync_backend is not set in this location")
        return ngx_exit(HTTP_SERVICE_UNAVAILABLE)
    end
    return access_backend(name)
end
_M.access_backend = access_backend

-- retry_peer returns the endpoint for the next try after ep failed: the
-- next usable one in list order that this request has not tried.
local function retry_peer(ctx, entry, ep)
    local tried = ctx.restysync_tried
    if not tried then
        tried = {}
        ctx.restysync_tried = tried
    end
    tried[ep] = true
    local list = entry.endpoints
    local i = ep.index or 1
    if list[i] ~= ep then
        i = 1 -- ep left the list in a rebuild since the request started
    end
    return health.next_usable(list, i, ngx_now(), tried) or list[i % #list + 1]
end

-- balance sets the peer access() picked; call it from balancer_by_lua_block.
-- nginx calls it again for each retry (proxy_next_upstream) after the
-- previous endpoint failed.
function _M.balance()
    local ctx = ngx.ctx
    local entry, ep = ctx.restysync_entry, ctx.restysync_peer
    if not ep then
        ngx_log(ngx_ERR, "restysync: no endpoint picked; is access_by_lua_block missing?")
        return ngx_exit(HTTP_INTERNAL_SERVER_ERROR)
    end
    local state = get_last_failure()
    if state == nil then
        local loc = ctx.restysync_timeouts
        if loc then
            -- nil keeps the location's own (the default server's) timeout;
            -- the values hold for the retries too.
            local ok, err = set_timeouts(loc.connect_timeout, loc.send_timeout, loc.read_timeout)
            if not ok then
                ngx_log(ngx_ERR, "restysync: set_timeouts: ", err)
            end
        end
        -- A Gateway rule's retry (restysync.router) sets its own tries,
        -- the same endpoint again when it is the only one.
        local tries = ctx.restysync_tries or math_min(#entry.endpoints, entry.policy.tries)
        if tries > 1 then
            local ok, err = set_more_tries(tries - 1)
            if not ok then
                ngx_log(ngx_ERR, "restysync: set_more_tries: ", err)
            end
        end
    else
        -- "failed": an error, a timeout, an invalid header or a status
        -- proxy_next_upstream names; "next": a 403 or 404 it names, which,
        -- as for nginx's own max_fails, is not a failure of the endpoint.
        if state == "failed" then
            health.failed(ep, entry.policy)
        end
        if entry.ewma then
            ewma.finished(ep)
        end
        ep = retry_peer(ctx, entry, ep)
        ctx.restysync_peer = ep
        if entry.affinity and entry.policy.cookie_change_on_failure then
            affinity.pin(entry, ep)
        end
    end
    if entry.ewma then
        ewma.started(ep)
        ctx.restysync_started = true
    end
    local ok, err = set_current_peer(ep.host, ep.port)
    if not ok then
        ngx_log(ngx_ERR, "restysync: set_current_peer ", ep.key, ": ", err)
        return ngx_exit(HTTP_INTERNAL_SERVER_ERROR)
    end
end

-- last_attempt_failed says whether the last endpoint this request tried
-- failed to connect or timed out: nothing came back from it
-- ($upstream_bytes_received holds one value per attempt).
local function last_attempt_failed()
    local received = ngx_var.upstream_bytes_received
    return received ~= nil and string_match(received, "(%d+)%s*$") == "0"
end

-- log counts the request for its backend; call it from log_by_lua_block
-- (at http level: requests that access() did not see are not counted).
function _M.log()
    local ctx = ngx.ctx
    local entry = ctx.restysync_entry
    record(ctx, entry)
    if not entry then
        return
    end
    local ep = ctx.restysync_peer
    local status = ngx.status
    local failed = status >= 502 and status <= 504
    -- An endpoint that failed on the last attempt counts as a failure for
    -- passive health; its (short) response time is not a measurement.
    local ep_failed = failed and ep ~= nil and last_attempt_failed()
    if ep_failed then
        health.failed(ep, entry.policy)
    end
    if entry.ewma and ctx.restysync_started then
        ewma.finished(ep)
        if not ep_failed then
            ewma.observe(ep, ngx_var.upstream_response_time, ngx_now())
        end
    end
    local m = restysync.metrics_dict()
    if not m then
        return
    end
    m:incr(entry.requests_key, 1, 0)
    if failed then
        m:incr(entry.failures_key, 1, 0)
    end
end

-- Private functions, reachable by tests.
setmetatable(_M, { __index = {
    build = build,
    cache = cache,
} })

return _M
