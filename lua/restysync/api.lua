-- restysync.api: the config API the agent talks to.
--
-- Served by content_by_lua in a server that listens only on a unix socket in
-- the shared dir. It stores certificates as restysync.certs describes, and
-- routes as restysync.routes describes, and backends in the shared dict:
--
--   b:<name>  the endpoints, a compact JSON array of {"address","port"}
--   p:<name>  its policy (restysync.policy), absent for the default one
--   v:<name>  the version at which that backend last changed
--   version   bumped once per accepted POST /backends, /certificates or /routes
--   count     how many b: keys there are
--   boot_id   set by restysync.init, new on every cold start
--
-- GET /metrics reports, per backend, its endpoints and the request counters
-- restysync.balancer keeps in the restysync_metrics dict; the counters of a
-- removed backend are dropped with it.
--
-- Workers compare v:<name> with their cached copy on each request (see
-- restysync.balancer), so b:<name> is always written before v:<name>.
-- A POST is validated whole before anything is written, and written whole or
-- not at all: a write the dict has no room for is undone.
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
local certs = require "restysync.certs"
local routes_store = require "restysync.routes"
local check = require "restysync.check"
local policy = require "restysync.policy"
local store = require "restysync.store"

local ngx = ngx
local ngx_var = ngx.var
local ngx_req = ngx.req
local ngx_print = ngx.print
local ngx_header = ngx.header
local ngx_log = ngx.log
local ngx_ERR = ngx.ERR
local io_open = io.open
local os_remove = os.remove
local string_gmatch = string.gmatch
local pairs = pairs
local ipairs = ipairs
local tonumber = tonumber
local pcall = pcall
local type = type
local tostring = tostring
local math_floor = math.floor
local string_find = string.find
local string_match = string.match
local string_sub = string.sub
local string_format = string.format
local table_concat = table.concat
local string_byte = string.byte
local bit = require "bit"
local bit_bor = bit.bor
local bit_bxor = bit.bxor

local _M = { _VERSION = "0.1" }

-- Limits of one POST /backends.
local MAX_ENDPOINTS = 10000

local array_length = check.array_length
local is_object = check.is_object
local unknown_field = check.unknown_field

-- A private cjson instance: its settings do not leak into other code.
local json = cjson.new()
json.decode_invalid_numbers(false)
json.decode_max_depth(16)
local json_null = json.null
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

-- check_endpoints validates the endpoints of one backend and returns them
-- as the compact JSON array stored under b:<name>, or nil and the reason.
local function check_endpoints(endpoints, path)
    if endpoints == json_null then
        return "[]" -- a Go nil slice: no endpoints
    end
    local n = array_length(endpoints)
    if not n then
        return nil, path .. ": must be an array"
    end
    if n > MAX_ENDPOINTS then
        return nil, string_format("%s: has %d endpoints, more than %d", path, n, MAX_ENDPOINTS)
    end
    local parts = {}
    for i = 1, n do
        local ep = endpoints[i]
        local at = string_format("%s[%d]", path, i - 1)
        if not is_object(ep) then
            return nil, at .. ": must be an object"
        end
        local extra = unknown_field(ep, ENDPOINT_FIELDS)
        if extra then
            return nil, at .. "." .. tostring(extra) .. ": unknown field"
        end
        local address, port = ep.address, ep.port
        if type(address) ~= "string" or not (is_ipv4(address) or is_ipv6(address)) then
            return nil, at .. ".address: must be an IPv4 or IPv6 address"
        end
        if not is_port(port) then
            return nil, at .. ".port: must be an integer 1..65535"
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
        local endpoints, err = check_endpoints(b.endpoints, at .. ".endpoints")
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
        if d:get("b:" .. b.name) == nil then
            count = count + 1
        end
        writes[#writes + 1] = { "b:" .. b.name, b.endpoints }
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

local function get_status()
    local d = dict()
    reply(200, json_encode({
        config_hash = restysync.config_hash(),
        boot_id = d:get("boot_id") or "",
        version = d:get("version") or 0,
        backends = d:get("count") or 0,
        certificates = certs.count(d),
        routes = routes_store.count(d),
    }))
end

-- backend_names returns the names of the backends d holds, sorted.
local function backend_names(d)
    return store.names(d, "b:")
end

local function get_backends()
    local d = dict()
    local names = backend_names(d)
    local parts = {}
    for _, name in ipairs(names) do
        local endpoints = d:get("b:" .. name)
        if endpoints then
            local stored_policy = d:get("p:" .. name)
            parts[#parts + 1] = '{"name":' .. json_encode(name) .. ',"endpoints":' .. endpoints
                .. (stored_policy and (',"policy":' .. stored_policy) or "") .. "}"
        end
    end
    reply(200, '{"backends":[' .. table_concat(parts, ",") .. "]}")
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

local function get_metrics()
    local d = dict()
    local m = restysync.metrics_dict()
    local names = backend_names(d)
    local parts = {}
    for _, name in ipairs(names) do
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
    reply(200, string_format('{"backends":[%s],"balancer_rebuilds":%d,"regex_failures":%d,"certificates":%d,"counting":%s,"api_denied":%d,"loop_refused":%d}',
        table_concat(parts, ","), m and m:get("rebuilds") or 0, m and m:get("regex_failures") or 0, certs.count(d),
        m and "true" or "false", m and m:get("api_denied") or 0, m and m:get("loop_refused") or 0))
end

local function get_certificates()
    reply(200, certs.list(dict()))
end

-- post reads a JSON object, checks it with check_body and stores it with
-- write_update under the lock; what names the stored items in messages.
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
    return post(check_update, write, "backends")
end

local function post_certificates()
    return post(certs.check_update, certs.write, "certificates")
end

local function get_routes()
    reply(200, routes_store.list(dict()))
end

local function post_routes()
    return post(routes_store.check_update, routes_store.write, "routes")
end

-- Worker access ----------------------------------------------------------

-- MAX_ACCESS_PATHS bounds one POST /access.
local MAX_ACCESS_PATHS = 10000
local ACCESS_FIELDS = { read = true, write = true }

-- check_access_paths returns the list at body[field] if it holds only
-- relative paths under the prefix ("auth/ns_name", "tmp/client_body"), or
-- nil and the reason.
local function check_access_paths(body, field)
    local paths = body[field]
    if paths == nil then
        return {}
    end
    local n = array_length(paths)
    if not n then
        return nil, field .. ": must be an array"
    end
    if n > MAX_ACCESS_PATHS then
        return nil, string_format("%s: more than %d paths", field, MAX_ACCESS_PATHS)
    end
    for i = 1, n do
        local p = paths[i]
        local at = string_format("%s[%d]", field, i - 1)
        if type(p) ~= "string" or #p == 0 or #p > 1024 then
            return nil, at .. ": must be a path of 1 to 1024 bytes"
        end
        if not string_match(p, "^[%w._-]+[%w._/-]*$") or string_find(p, "//", 1, true)
            or string_sub(p, -1) == "/" then
            return nil, at .. ": must be a relative path of letters, digits and ._-/"
        end
        for part in string_gmatch(p, "[^/]+") do
            if part == "." or part == ".." then
                return nil, at .. ": must not hold . or .. parts"
            end
        end
    end
    return paths
end

-- post_access answers which of the paths under the prefix this worker (and
-- so every worker: they run as one user) cannot read, or cannot create a
-- file in. The agent asks it after nginx (re)starts and whenever the files
-- it writes for nginx change, and names each failure in its log and in
-- /readyz: a worker that cannot read an htpasswd file fails every request
-- of its Ingress with 500, and nothing else would say why.
local function post_access()
    local body, status, reason = read_object()
    if not body then
        return fail(status, reason)
    end
    local field = unknown_field(body, ACCESS_FIELDS)
    if field then
        return fail(400, "body: unknown field " .. field)
    end
    local read, rerr = check_access_paths(body, "read")
    if not read then
        return fail(400, rerr)
    end
    local write, werr = check_access_paths(body, "write")
    if not write then
        return fail(400, werr)
    end
    local prefix = ngx.config.prefix()
    if string_sub(prefix, -1) ~= "/" then
        prefix = prefix .. "/"
    end
    local denied = {}
    for _, p in ipairs(read) do
        local f, err = io_open(prefix .. p, "rb")
        if f then
            f:close()
        else
            denied[#denied + 1] = { path = prefix .. p, access = "read", error = tostring(err) }
        end
    end
    for _, p in ipairs(write) do
        local probe = prefix .. p .. "/.restysync-access-" .. ngx.worker.pid()
        local f, err = io_open(probe, "wb")
        if f then
            f:close()
            os_remove(probe)
        else
            denied[#denied + 1] = { path = prefix .. p, access = "write", error = tostring(err) }
        end
    end
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

local routes = {
    ["/status"] = { GET = get_status, HEAD = get_status },
    ["/routes"] = { GET = get_routes, POST = post_routes },
    ["/backends"] = { GET = get_backends, POST = post_backends },
    ["/certificates"] = { GET = get_certificates, POST = post_certificates },
    ["/metrics"] = { GET = get_metrics },
    ["/access"] = { POST = post_access },
}

local allowed_methods = {
    ["/status"] = "GET, HEAD",
    ["/backends"] = "GET, POST",
    ["/certificates"] = "GET, POST",
    ["/routes"] = "GET, POST",
    ["/metrics"] = "GET",
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
    local route = routes[uri]
    if not route then
        return fail(404, "no such endpoint: " .. uri)
    end
    local handler = route[method]
    if not handler then
        ngx_header["Allow"] = allowed_methods[uri]
        return fail(405, "method not allowed; use " .. allowed_methods[uri])
    end
    return handler()
end

-- Private functions, reachable by tests.
setmetatable(_M, { __index = {
    check_update = check_update,
    check_access_paths = check_access_paths,
    is_ipv4 = is_ipv4,
    is_ipv6 = is_ipv6,
    secret_matches = secret_matches,
} })

return _M
