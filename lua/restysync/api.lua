-- restysync.api: the config API the agent talks to, and only that: the
-- dispatch of its requests and who may ask.
--
-- Served by content_by_lua in a server that listens only on a unix socket in
-- the shared dir. What it stores each module of its own checks and writes:
-- backends restysync.backends, routes restysync.routes, certificates
-- restysync.certs; the shared dict also holds
--
--   version   bumped once per accepted POST /backends, /certificates or /routes
--   boot_id   set by restysync.init, new on every cold start
--   restored  true when this boot started from the agent's saved state
--             (restysync.state)
--
-- A POST is decoded here, checked whole by its module before anything is
-- written, and written under the update lock (restysync.store), whole or
-- not at all. POST /access asks restysync.fileaccess which files the
-- workers cannot use. GET /metrics reports, per backend, its endpoints and
-- the request counters restysync.balancer keeps in the restysync_metrics
-- dict, and nginx's processes and connections; GET /metrics/requests the
-- request metrics restysync.requests keeps.
--
-- Who may ask. The socket is a file in the shared dir, and nginx's own
-- workers can connect to it: a tenant's mirror-target or auth-url of
-- "http://unix:<shared>/restysync.sock:/backends" once made them POST into
-- it. So the API answers only the agent:
--
-- * Every request but GET and HEAD /status carries the agent's secret in
--   X-Restysync-Secret. The agent writes it (64 hex digits, mode 0600) to
--   restysync.secret in the shared dir before the first nginx.conf;
--   load_secret reads it in the master (init_by_lua, on every start and
--   HUP) into an upvalue of this module, which the workers inherit. It is
--   never put in an nginx variable (a snippet or a log format could name
--   one) and never logged. It is compared in constant time. No file, or not
--   a secret: only GET /status answers, and the error log says why.
-- * A request nginx itself makes is refused whatever it carries (a client's
--   headers travel with a mirror or an auth request, so a leaked secret
--   must not be enough). ngx.req.is_internal() catches an internal
--   redirect or subrequest inside this server. A request a worker proxied
--   to the socket is a fresh connection, so it is told by its headers:
--   the template's mirror and auth locations, the two whose target is a
--   variable a tenant's URL fills, set X-Restysync-Proxied; every location
--   that proxies sets X-Request-ID, never empty ($request_id when the
--   client sent none). The agent sends neither. Tenants cannot take them
--   off: snippets may not write set, if or *_pass and reach only their own
--   profile location, whose backends are IP endpoints; auth-proxy-set-headers
--   of the same name add a second header line, and nginx sends every
--   non-empty one, so the template's stays.
--
-- Each refusal is a 403, counted as api_denied in restysync_metrics
-- (GET /metrics; the agent's restysync_lua_api_denied_total), with an
-- error-log line at most once a second per worker.

local cjson = require "cjson"
local restysync = require "restysync"
local backends = require "restysync.backends"
local certs = require "restysync.certs"
local routes = require "restysync.routes"
local fileaccess = require "restysync.fileaccess"
local store = require "restysync.store"
local requests = require "restysync.requests"

local ngx = ngx
local ngx_var = ngx.var
local ngx_req = ngx.req
local ngx_print = ngx.print
local ngx_header = ngx.header
local ngx_log = ngx.log
local ngx_ERR = ngx.ERR
local io_open = io.open
local ipairs = ipairs
local pcall = pcall
local type = type
local tostring = tostring
local string_find = string.find
local string_sub = string.sub
local string_format = string.format
local table_concat = table.concat
local string_byte = string.byte
local bit = require "bit"
local bit_bor = bit.bor
local bit_bxor = bit.bxor

local _M = { _VERSION = "0.1" }

-- A private cjson instance: its settings do not leak into other code.
local json = cjson.new()
json.decode_invalid_numbers(false)
json.decode_max_depth(16)
local json_encode = json.encode

local function dict()
    return restysync.dict()
end

-- Responses --------------------------------------------------------------

local function reply(status, body)
    ngx.status = status
    ngx_header["Content-Type"] = "application/json"
    ngx_print(body, "\n")
end

local function fail(status, reason)
    reply(status, '{"error":' .. json_encode(reason) .. "}")
end

-- Handlers ---------------------------------------------------------------

local function read_body()
    ngx_req.read_body()
    local body = ngx_req.get_body_data()
    if body then
        return body
    end
    local path = ngx_req.get_body_file()
    if not path then
        return nil
    end
    local f, err = io_open(path, "rb")
    if not f then
        return nil, "reading the spilled request body: " .. tostring(err)
    end
    body = f:read("*a")
    f:close()
    return body
end

-- nginx_configure is the binary's configure arguments, which say the
-- modules built in (--with-stream, --add-module=...headers-more...).
local nginx_configure = ngx.config.nginx_configure()

local function get_status()
    local d = dict()
    reply(200, json_encode({
        config_hash = restysync.config_hash(),
        boot_id = d:get("boot_id") or "",
        restored = d:get("restored") == true,
        version = d:get("version") or 0,
        backends = backends.count(d),
        certificates = certs.count(d),
        routes = routes.count(d),
        -- Which nginx this is, for the agent to render for it
        -- (render.NginxFromStatus): constant per binary.
        nginx_version = ngx.config.nginx_version,
        ngx_lua_version = ngx.config.ngx_lua_version,
        nginx_configure = nginx_configure,
    }))
end

local function get_backends()
    reply(200, backends.list(dict()))
end

local function get_metrics()
    local d = dict()
    local m = restysync.metrics_dict()
    reply(200, string_format('{"backends":%s,"balancer_rebuilds":%d,"regex_failures":%d,"certificates":%d,"counting":%s,"api_denied":%d,"loop_refused":%d,"nginx":%s}',
        backends.counters(d, m), m and m:get("rebuilds") or 0, m and m:get("regex_failures") or 0, certs.count(d),
        m and "true" or "false", m and m:get("api_denied") or 0, m and m:get("loop_refused") or 0,
        json_encode(requests.nginx())))
end

-- get_request_metrics reports the request metrics (restysync.requests).
local function get_request_metrics()
    reply(200, requests.report())
end

local function get_certificates()
    reply(200, certs.list(dict()))
end

-- read_object returns the request body decoded as a JSON object, or nil,
-- the status and the reason to fail with.
local function read_object()
    local raw, rerr = read_body()
    if not raw then
        if rerr then
            ngx_log(ngx_ERR, "restysync: ", rerr)
            return nil, 500, rerr
        end
        return nil, 400, "body: is empty"
    end
    -- cjson decodes [] as an empty table, like {}; only an object is an update.
    if not string_find(raw, "^%s*{") then
        return nil, 400, "body: must be a JSON object"
    end
    local ok, body = pcall(json.decode, raw)
    if not ok then
        return nil, 400, "body: is not valid JSON: " .. tostring(body)
    end
    return body
end

-- post reads a JSON object, checks it with check_body and stores it with
-- write_update under the lock; what names the stored items in messages.
local function post(check_body, write_update, what)
    local body, status, reason = read_object()
    if not body then
        return fail(status, reason)
    end
    local cok, update, err = pcall(check_body, body)
    if not cok then
        ngx_log(ngx_ERR, "restysync: checking ", what, ": ", update)
        return fail(500, "checking " .. what .. ": " .. tostring(update))
    end
    if not update then
        return fail(400, err)
    end

    local d = dict()
    local locked, lerr = store.lock(d)
    if not locked then
        return fail(503, lerr)
    end
    local pok, version, status, reason = pcall(write_update, d, update)
    store.unlock(d)
    if not pok then
        ngx_log(ngx_ERR, "restysync: storing ", what, ": ", version)
        return fail(500, "storing " .. what .. ": " .. tostring(version))
    end
    if not version then
        if status >= 500 then
            ngx_log(ngx_ERR, "restysync: ", reason)
        end
        return fail(status, reason)
    end
    reply(200, string_format('{"version":%d}', version))
end

local function post_backends()
    return post(backends.check_update, backends.write, "backends")
end

local function post_certificates()
    return post(certs.check_update, certs.write, "certificates")
end

local function get_routes()
    reply(200, routes.list(dict()))
end

local function post_routes()
    return post(routes.check_update, routes.write, "routes")
end

-- Worker access ----------------------------------------------------------

-- post_access answers which of the paths under the prefix the workers
-- cannot read or create a file in (restysync.fileaccess).
local function post_access()
    local body, status, reason = read_object()
    if not body then
        return fail(status, reason)
    end
    local read, write, err = fileaccess.check_request(body)
    if not read then
        return fail(400, err)
    end
    local denied = fileaccess.denied(read, write)
    local parts = {}
    for i, d in ipairs(denied) do
        parts[i] = json_encode(d)
    end
    reply(200, '{"denied":[' .. table_concat(parts, ",") .. "]}")
end

-- Who may ask -------------------------------------------------------------

-- SECRET_NAME is the file in nginx's prefix (the shared dir) that holds the
-- agent's secret; luaapi.SecretName in Go.
local SECRET_NAME = "restysync.secret"

-- secret is what load_secret read, nil when there is none.
local secret

-- load_secret reads the agent's secret; restysync.init calls it in the
-- master. Without one only GET /status answers.
function _M.load_secret()
    secret = nil
    local prefix = ngx.config.prefix()
    if string_sub(prefix, -1) ~= "/" then
        prefix = prefix .. "/"
    end
    local path = prefix .. SECRET_NAME
    local f, err = io_open(path, "rb")
    if not f then
        ngx_log(ngx_ERR, "restysync: no config API secret (", err, "): the config API refuses every ",
            "request but GET /status until a reload finds one")
        return
    end
    local s = f:read("*a")
    f:close()
    if type(s) ~= "string" or #s ~= 64 or not string_find(s, "^[0-9a-f]+$") then
        ngx_log(ngx_ERR, "restysync: ", path, " is not a config API secret (64 lowercase hex digits): ",
            "the config API refuses every request but GET /status until a reload finds one")
        return
    end
    secret = s
end

-- secret_matches compares given with the secret in time that does not
-- depend on where they differ.
local function secret_matches(given)
    if not secret or type(given) ~= "string" then
        return false
    end
    local diff = (#given == #secret) and 0 or 1
    for i = 1, #secret do
        diff = bit_bor(diff, bit_bxor(string_byte(secret, i), string_byte(given, i) or 0))
    end
    return diff == 0
end

-- refusal returns why this request may not be answered, or nil.
local function refusal(uri, method)
    if ngx_req.is_internal() or ngx_var.http_x_restysync_proxied ~= nil or ngx_var.http_x_request_id ~= nil then
        return "a request from inside nginx (a subrequest, mirror, auth request or proxied request)"
    end
    if uri == "/status" and (method == "GET" or method == "HEAD") then
        return nil
    end
    if not secret then
        return "no config API secret is loaded; only GET /status answers"
    end
    if not secret_matches(ngx_var.http_x_restysync_secret) then
        return "X-Restysync-Secret is missing or wrong"
    end
    return nil
end

local last_denied_log = 0

-- deny answers 403, counts it and logs it (at most once a second).
local function deny(reason, uri, method)
    local m = restysync.metrics_dict()
    if m then
        m:incr("api_denied", 1, 0)
    end
    local now = ngx.now()
    if now - last_denied_log >= 1 then
        last_denied_log = now
        ngx_log(ngx_ERR, "restysync: config API refused ", method, " ", uri, ": ", reason)
    end
    return fail(403, reason)
end

local endpoints = {
    ["/status"] = { GET = get_status, HEAD = get_status },
    ["/routes"] = { GET = get_routes, POST = post_routes },
    ["/backends"] = { GET = get_backends, POST = post_backends },
    ["/certificates"] = { GET = get_certificates, POST = post_certificates },
    ["/metrics"] = { GET = get_metrics },
    ["/metrics/requests"] = { GET = get_request_metrics },
    ["/access"] = { POST = post_access },
}

local allowed_methods = {
    ["/status"] = "GET, HEAD",
    ["/backends"] = "GET, POST",
    ["/certificates"] = "GET, POST",
    ["/routes"] = "GET, POST",
    ["/metrics"] = "GET",
    ["/metrics/requests"] = "GET",
    ["/access"] = "POST",
}

-- serve is the content handler of the config API server.
function _M.serve()
    local uri = ngx_var.uri
    local method = ngx_req.get_method()
    local reason = refusal(uri, method)
    if reason then
        return deny(reason, uri, method)
    end
    local endpoint = endpoints[uri]
    if not endpoint then
        return fail(404, "no such endpoint: " .. uri)
    end
    local handler = endpoint[method]
    if not handler then
        ngx_header["Allow"] = allowed_methods[uri]
        return fail(405, "method not allowed; use " .. allowed_methods[uri])
    end
    return handler()
end

-- Private functions, reachable by tests.
setmetatable(_M, { __index = {
    secret_matches = secret_matches,
    refusal = refusal,
} })

return _M
