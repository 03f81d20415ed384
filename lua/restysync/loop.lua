-- restysync.loop: the loop guard of the requests nginx sends to URLs a
-- tenant chose (auth-url, global-auth-url, mirror-target).
--
-- A DNS name in such a URL is resolved by nginx at run time, so a tenant
-- can make it resolve to nginx itself (a headless Service whose
-- EndpointSlice holds the ingress pod's IP, a public name that answers
-- 127.0.0.1). A location whose auth or mirror points back at a location
-- with the same would then send requests into nginx again and again, each
-- client request holding more worker connections.
--
-- Every nginx process (master and its workers) holds a token, 32 hex
-- digits from /dev/urandom made in the master at each start and HUP
-- (restysync.init). The template's auth and mirror locations send
-- X-Restysync-Proxied with via(): the tokens of the restysync instances the
-- request already passed as such a subrequest, then this one's. nginx
-- replaces a client's header of that name on these requests (every other
-- proxied request sends it empty, so nginx leaves it out). The router
-- (restysync.router.route) asks refuse() for every location that itself
-- sends such requests (the route's "loop_guard" flag): a request that
-- carries this instance's token, or MAX_HOPS tokens of any instance (a
-- loop through several replicas), is answered 508 Loop Detected, counted
-- as loop_refused in restysync_metrics (the agent's
-- restysync_lua_loop_refused_total), with an error-log line at most once a
-- second per worker. A location without auth or mirror serves such a
-- request: an auth service behind this same nginx (auth-url
-- https://$host/oauth2/auth) keeps working.
--
-- The token is not a secret the guard relies on: it travels to the
-- tenant's auth service and mirror target by design. A client that sends
-- it only gets its own request refused. It is per instance so that a
-- request of another restysync (a mirror into another cluster) is refused
-- only after MAX_HOPS, never at its first hop. It is kept in an upvalue,
-- never in an nginx variable of its own, and never logged.

local restysync = require "restysync"

local ngx = ngx
local ngx_var = ngx.var
local ngx_log = ngx.log
local ngx_ERR = ngx.ERR
local ngx_exit = ngx.exit
local string_gmatch = string.gmatch
local string_format = string.format
local table_concat = table.concat
local type = type

local _M = { _VERSION = "0.1" }

-- MAX_HOPS is how many restysync auth or mirror requests in a row a
-- request may have passed before a location that sends another refuses it.
local MAX_HOPS = 4
_M.MAX_HOPS = MAX_HOPS

-- HTTP_LOOP_DETECTED is RFC 5842's status.
local HTTP_LOOP_DETECTED = 508

-- token is this instance's, nil until set_token.
local token

-- set_token keeps t (32 lowercase hex digits); restysync.init calls it in
-- the master, whose workers inherit it.
function _M.set_token(t)
    if type(t) ~= "string" or not t:match("^%x+$") or #t ~= 32 then
        error("restysync.loop: token must be 32 hex digits")
    end
    token = t:lower()
end

-- hops returns the tokens in the request's X-Restysync-Proxied (at most
-- MAX_HOPS of them, anything else in the value skipped) and whether this
-- instance's is among them.
local function hops()
    local v = ngx_var.http_x_restysync_proxied
    if not v then
        return {}, false
    end
    local list, mine = {}, false
    for t in string_gmatch(v, "%x+") do
        if #t == 32 then
            t = t:lower()
            if t == token then
                mine = true
            end
            list[#list + 1] = t
            if #list >= MAX_HOPS then
                break
            end
        end
    end
    return list, mine
end

-- via is the X-Restysync-Proxied value of an auth or mirror request this
-- request sends: the tokens it came with (at most MAX_HOPS-1 of them, the
-- last ones kept) and this instance's.
function _M.via()
    local list = hops()
    local from = #list - (MAX_HOPS - 1) + 1
    local out = {}
    for i = (from > 1 and from or 1), #list do
        out[#out + 1] = list[i]
    end
    out[#out + 1] = token or "00000000000000000000000000000000"
    return table_concat(out, " ")
end

-- next_log is when a worker may next log a refusal: at most one line a
-- second, with how many it left out.
local next_log, unlogged = 0, 0

-- refuse answers 508 to a request that came round: call it where a
-- location that sends auth or mirror requests is picked. host names the
-- route for the log line.
function _M.refuse(host)
    if ngx_var.http_x_restysync_proxied == nil then
        return
    end
    local list, mine = hops()
    if not mine and #list < MAX_HOPS then
        return
    end
    local m = restysync.metrics_dict()
    if m then
        m:incr("loop_refused", 1, 0)
    end
    local now = ngx.now()
    if now < next_log then
        unlogged = unlogged + 1
    else
        ngx_log(ngx_ERR, "restysync: loop detected: a request to ", host, ngx_var.uri,
            mine and " came from this nginx's own auth or mirror request" or
                string_format(" passed %d restysync auth or mirror requests", #list),
            " and would send another; answered 508",
            unlogged > 0 and string_format(" (and %d more in this worker, not logged)", unlogged) or "")
        next_log, unlogged = now + 1, 0
    end
    return ngx_exit(HTTP_LOOP_DETECTED)
end

return _M
