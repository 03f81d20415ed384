-- restysync.router: the request's location, in place of nginx's server
-- blocks.
--
-- The default server's "location /" (and @restysync_body) call route() in
-- the access phase: it looks up the host's route in restysync.routes,
-- matches the path, answers what the location answers by itself
-- (redirects, 413, the loop guard's 508), jumps to the location's profile,
-- or hands the backend to restysync.balancer, which picks the endpoint.

local restysync = require "restysync"
local routes = require "restysync.routes"
local loop = require "restysync.loop"
local balancer = require "restysync.balancer"
local gateway = require "restysync.gateway"

local ngx = ngx
local ngx_var = ngx.var
local ngx_log = ngx.log
local ngx_exit = ngx.exit
local ngx_redirect = ngx.redirect
local ngx_exec = ngx.exec
local ngx_req_http_version = ngx.req.http_version
local ngx_ERR = ngx.ERR
local access_backend = balancer.access_backend
local serve_rule = gateway.serve
local has_gateway_location = restysync.has_gateway_location
local has_profile = restysync.has_profile
local mirror_backends = gateway.mirror_backends
local lookup_front = routes.lookup_front
local match_ordered = routes.match_ordered
local tonumber = tonumber
local string_byte = string.byte
local string_match = string.match
local string_sub = string.sub
local string_lower = string.lower
local ngx_now = ngx.now
local pairs = pairs
local stash, to_backend_tls -- below route_front, which calls them

local _M = { _VERSION = "0.1" }

local HTTP_PERMANENT_REDIRECT = 308
local HTTP_NOT_FOUND = 404
local HTTP_MISDIRECTED_REQUEST = 421
local HTTP_REQUEST_ENTITY_TOO_LARGE = 413
local HTTP_INTERNAL_SERVER_ERROR = 500
local HTTP_CLOSE = 444 -- nginx closes the connection, no answer

-- MIRROR_LOCATIONS[n] is the named location of a Gateway server that
-- sends n copies of the request (render/gateway.go writes them, up to
-- restysync.gateway's MAX_MIRRORS).
local MIRROR_LOCATIONS = {}
for n = 1, gateway.MAX_MIRRORS do
    MIRROR_LOCATIONS[n] = "@restysync_mirror_" .. n
end

-- BODY_LOCATION serves the requests of a location without a profile whose
-- body has no Content-Length (see route).
local BODY_LOCATION = "@restysync_body"

-- redirect_uri is the request URI a redirect keeps; strip drops one
-- trailing "/" (of the query too, when there is one), as ingress-nginx's
-- redirects do unless preserve-trailing-slash. "/" alone stays: an empty
-- path is "/" anyway.
local function redirect_uri(strip)
    local uri = ngx_var.request_uri
    if strip and #uri > 1 and string_byte(uri, -1) == 47 then -- "/"
        uri = string_sub(uri, 1, -2)
    end
    return uri
end

-- balance hands the request to backend name for loc: its timeouts go
-- to the balancer, and the access log learns the backend.
local function balance(loc, name, log_backend)
    if loc.timeouts then
        ngx.ctx.restysync_timeouts = loc
    end
    if log_backend then
        ngx_var.restysync_backend = name
    end
    return access_backend(name, loc.metric)
end

-- keep_metric hands the location's request metric labels to the log
-- phase (restysync.requests) for a request the router answers itself.
local function keep_metric(loc)
    if loc.metric then
        ngx.ctx.restysync_metric = loc.metric
    end
end

-- route is the access handler of the default server's "location /", which
-- every host reaches: its route in restysync.routes (the host's own, a wildcard's,
-- or for any other host the default server's "_") picks the location by
-- path, over HTTP and HTTPS alike: a host without TLS of its own is served
-- over HTTPS by its own locations with the default certificate, as
-- ingress-nginx serves it, never by "_", which another tenant's host-less
-- rule may own. No route or no matching path is a 404; a stored route that
-- does not decode a 500 (not "_"'s answer, for the same reason); a regex
-- that fails to run, or regexes that spend
-- the request's budget, a 500 (restysync.routes.match), as nginx answers
-- when a location's regex fails. A plain-HTTP request to a location with
-- ssl_redirect gets a 308 to HTTPS, on redirect_port (":PORT" or ""); a
-- request whose Content-Length is over the location's max_body gets a 413;
-- one with a body but no Content-Length jumps to @restysync_body, where
-- nginx checks the body as it reads it (in_body_location: route() runs
-- there again, and serves the request). A location whose auth or mirror
-- requests go to a tenant's URL (loop_guard) answers 508 to a request that
-- came round through them (restysync.loop).
-- A location with a profile is served by that named location: the backend,
-- the Ingress its limits count for, its htpasswd file and the profile's own
-- name (which the profile checks, so that no other request enters it) go
-- there in variables (ngx.ctx does not survive the jump), and its access()
-- picks the endpoint. Any other is balanced here (restysync.balancer's
-- access_backend); its timeouts are set by balance().
-- log_backend says the access log prints $restysync_backend, which is then
-- set (a variable write costs every request).
function _M.route(redirect_port, log_backend, in_body_location)
    local d = restysync.dict()
    local host = ngx_var.host
    local r, err = routes.lookup(d, host)
    if err then
        ngx_log(ngx_ERR, "restysync: route of ", host, ": ", err)
        return ngx_exit(HTTP_INTERNAL_SERVER_ERROR)
    end
    if not r then
        r, err = routes.default(d)
        if not r then
            if err then
                ngx_log(ngx_ERR, "restysync: default route: ", err)
            end
            return ngx_exit(HTTP_NOT_FOUND)
        end
    end
    local loc = r.only
    if not loc then
        local pattern, rerr
        loc, pattern, rerr = routes.match(r, ngx_var.uri)
        if rerr then
            routes.regex_failed("route of " .. host, pattern, rerr)
            return ngx_exit(HTTP_INTERNAL_SERVER_ERROR)
        end
        if not loc then
            return ngx_exit(HTTP_NOT_FOUND)
        end
    end
    if loc.loop_guard then
        -- The location sends auth or mirror requests to a tenant's URL: a
        -- request that came from such a request of this nginx gets a 508.
        keep_metric(loc)
        loop.refuse(host)
    end
    if loc.redirect_host then
        keep_metric(loc)
        -- from-to-www-redirect: the other name of a host goes to the host,
        -- with the scheme and the port the client used.
        local port = string_match(ngx_var.http_host or "", "(:%d+)$") or ""
        return ngx_redirect(ngx_var.restysync_forwarded_proto .. "://" .. loc.redirect_host .. port
            .. redirect_uri(true), HTTP_PERMANENT_REDIRECT)
    end
    if loc.ssl_redirect and ngx_var.restysync_forwarded_proto == "http" then
        keep_metric(loc)
        return ngx_redirect("https://" .. host .. (redirect_port or "")
            .. redirect_uri(not loc.preserve_trailing_slash), HTTP_PERMANENT_REDIRECT)
    end
    local name = loc.backend
    local profile = loc.profile
    if loc.max_body then
        local length = tonumber(ngx_var.http_content_length)
        if length then
            if length > loc.max_body then
                keep_metric(loc)
                return ngx_exit(HTTP_REQUEST_ENTITY_TOO_LARGE)
            end
        elseif not profile and not in_body_location
            and (ngx_var.http_transfer_encoding or ngx_req_http_version() == 2) then
            -- A body without Content-Length is checked as it is read, against
            -- the location's client_max_body_size: the router's would let
            -- the largest any location allows through. A profile has its
            -- own; any other location's is the http block's, which
            -- @restysync_body has. HTTP/2 does not say in a variable whether
            -- a body follows, so every HTTP/2 request without one goes.
            return ngx_exec(BODY_LOCATION)
        end
    end
    if profile then
        if not has_profile(profile) then
            -- A worker of the config before the reload that brought the
            -- profile, still finishing its keep-alive connections: it
            -- closes this one unanswered, and the client's retry on a new
            -- connection reaches a worker that has the profile.
            return ngx_exit(HTTP_CLOSE)
        end
        -- The profile answers 404 unless this names it: a backend's
        -- X-Accel-Redirect cannot enter another route's profile.
        ngx_var.restysync_profile = profile
        ngx_var.restysync_backend = name
        if loc.ingress then
            ngx_var.restysync_ingress = loc.ingress
        end
        if loc.auth_file then
            ngx_var.restysync_auth_file = loc.auth_file
        end
        if loc.metric then
            -- ngx.ctx does not survive the jump.
            ngx_var.restysync_metric = loc.metric
        end
        return ngx_exec(profile)
    end
    return balance(loc, name, log_backend)
end

-- route_front is the access handler of a Gateway listener's server
-- (render/gateway.go), which sets $restysync_front: the request's route
-- is the front's route of its host (restysync.routes.lookup_front: the
-- host's, a wildcard's, the front's "_"), never an Ingress's; its
-- location is the first of the ordered route whose path and rule hold
-- (routes.match_ordered), and its rule's filters run before the backend
-- is balanced (restysync.gateway.serve). No route, no location: 404; a
-- stored route that does not decode, a regex that could not decide, a
-- share without a backend: 500. On HTTPS, a Host whose route is another
-- listener's than the TLS server name's is answered 421 (a misdirected
-- request). It is a handler of its own so that the default server's
-- route() pays nothing for fronts.
-- A rule that retries on answers of some codes is served in the server's
-- named location of those codes (here names the location this runs in,
-- nil for "location /"), where nginx's proxy_next_upstream names them:
-- the router jumps there before anything of the request changed, and
-- routes it again there (ngx.ctx does not survive the jump). Until a
-- reload brings that location, the rule is served here, retried on
-- errors and timeouts only. The rule's tries go to the balancer.
-- A location whose rule mirrors: a request that came round through this
-- nginx's mirrors gets a 508 (restysync.loop); the mirrors it goes to are
-- drawn, named in $restysync_mirrors, and the request jumps to the named
-- location that sends that many copies (MIRROR_LOCATIONS), whose handler
-- is route_front again with mirrored set: the rule's filters run there,
-- and $restysync_mirror_uri keeps the path the backend gets, for the
-- copies (mirror()).
-- A rule with both mirrors and retry codes retries on errors and timeouts
-- only: its request is served in the mirror location.
-- A share whose Service a BackendTLSPolicy applies to names its backend
-- TLS location (tls): the request goes there once its backend is picked
-- (to_backend_tls), and a rule with retry codes retries on errors and
-- timeouts only there. The model gives no such rule mirrors.
function _M.route_front(log_backend, here, mirrored)
    local d = restysync.dict()
    local front = ngx_var.restysync_front
    local host = ngx_var.host
    local r, err = lookup_front(d, front, host)
    if err then
        ngx_log(ngx_ERR, "restysync: route of ", front, " ", host, ": ", err)
        return ngx_exit(HTTP_INTERNAL_SERVER_ERROR)
    end
    local sni = ngx_var.ssl_server_name
    if sni and sni ~= "" then
        -- HTTPS: the TLS server name picked a listener's certificate; a
        -- Host of another listener is misdirected (421), as when a client
        -- reuses a connection for another name.
        sni = string_lower(sni)
        if sni ~= host then
            local by_sni, serr = lookup_front(d, front, sni)
            if not serr and (by_sni and by_sni.listener or "") ~= (r and r.listener or "") then
                return ngx_exit(HTTP_MISDIRECTED_REQUEST)
            end
        end
    end
    if not r then
        return ngx_exit(HTTP_NOT_FOUND)
    end
    local uri = ngx_var.uri
    -- A route under a front is ordered (restysync.routes checks it).
    local loc, pattern, rerr = match_ordered(r, uri)
    if rerr then
        routes.regex_failed("route of " .. front .. " " .. host, pattern, rerr)
        return ngx_exit(HTTP_INTERNAL_SERVER_ERROR)
    end
    if not loc then
        return ngx_exit(HTTP_NOT_FOUND)
    end
    local rule = loc.rule
    if rule and rule.mirrors and not mirrored and not here then
        loop.refuse(host)
        local names, n = mirror_backends(rule)
        if names then
            ngx_var.restysync_mirrors = names
            return ngx_exec(MIRROR_LOCATIONS[n])
        end
    end
    local retry = rule and rule.retry
    if retry then
        local there = retry.location
        if there and there ~= here and not mirrored and has_gateway_location(there) then
            return ngx_exec(there)
        end
        ngx.ctx.restysync_tries = retry.tries
    end
    local name, tls = serve_rule(loc, uri)
    if not name then
        return ngx_exit(HTTP_INTERNAL_SERVER_ERROR)
    end
    if mirrored then
        ngx_var.restysync_mirror_uri = ngx_var.uri
    end
    if tls then
        return to_backend_tls(loc, name, tls)
    end
    return balance(loc, name, log_backend)
end

-- to_backend_tls sends the request to the Gateway server's backend TLS
-- location tls, which proxies to backend name over TLS and checks its
-- certificate. Its ngx.ctx (the rule's response header edits, CORS, the
-- retry's tries, the location's timeouts and request metric) does not
-- survive the jump, so it is kept for that location under
-- $restysync_ctx. A worker of the config before the reload that brought
-- the location (plan pushes such a route after that reload; apply waits
-- for the old workers' requests first) closes the connection unanswered,
-- as route() does for a profile it lacks: the client's retry reaches a
-- worker that has it. Never plain HTTP to a backend that wants TLS.
function to_backend_tls(loc, name, tls)
    if not has_gateway_location(tls) then
        return ngx_exit(HTTP_CLOSE)
    end
    local ctx = ngx.ctx
    if loc.timeouts then
        ctx.restysync_timeouts = loc
    end
    if loc.metric then
        ctx.restysync_metric = loc.metric
    end
    ngx_var.restysync_backend = name
    ngx_var.restysync_ctx = stash(ctx, tls)
    return ngx_exec(tls)
end

-- stashed are the ngx.ctx of requests on their way to a backend TLS
-- location, with its name, by id ($restysync_ctx); each is taken once, at
-- once, by that location. An entry left (a request that ended before the
-- jump) is dropped after STASH_SECONDS, which stash checks once there are
-- STASH_CHECK of them.
local stashed, stash_count, stash_id = {}, 0, 0
local STASH_SECONDS, STASH_CHECK = 60, 1000

function stash(ctx, location)
    if stash_count >= STASH_CHECK then
        local old = ngx_now() - STASH_SECONDS
        for id, entry in pairs(stashed) do
            if entry.at < old then
                stashed[id] = nil
                stash_count = stash_count - 1
            end
        end
    end
    stash_id = stash_id + 1
    stashed[stash_id] = { ctx = ctx, location = location, at = ngx_now() }
    stash_count = stash_count + 1
    return stash_id
end

-- enter_backend_tls is the access handler of a Gateway server's backend
-- TLS location name (render/gateway.go): it takes back the request's
-- ngx.ctx and balances its backend. A request that route_front did not
-- send to this location (a backend's X-Accel-Redirect) has none: 404.
function _M.enter_backend_tls(name)
    local id = tonumber(ngx_var.restysync_ctx)
    local entry = id and stashed[id]
    if not entry or entry.location ~= name then
        return ngx_exit(HTTP_NOT_FOUND)
    end
    stashed[id] = nil
    stash_count = stash_count - 1
    ngx_var.restysync_ctx = ""
    ngx.ctx = entry.ctx
    return access_backend(ngx_var.restysync_backend)
end

-- mirror is the rewrite handler of a Gateway server's internal mirror
-- location, which nginx's mirror module enters with one subrequest per
-- copy, "_restysync_mirror/<i>" (a URI no client request has: they all
-- start with "/"): copy i gets the path the request's backend gets and
-- is balanced to the i-th backend of $restysync_mirrors. A subrequest
-- shares its request's variables and headers, so it carries the rule's
-- header edits. Anything but such a subrequest is answered 404. (The
-- access phase does not run for subrequests: hence a rewrite handler.)
function _M.mirror()
    local i = tonumber(string_match(ngx_var.uri, "^_restysync_mirror/(%d+)$"))
    local names = ngx_var.restysync_mirrors
    local uri = ngx_var.restysync_mirror_uri
    local name = ngx.is_subrequest and i and names and uri and uri ~= "" and gateway.mirror_backend(names, i)
    if not name then
        return ngx_exit(HTTP_NOT_FOUND)
    end
    ngx.req.set_uri(uri)
    return access_backend(name)
end

return _M
