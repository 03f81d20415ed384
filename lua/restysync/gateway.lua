-- restysync.gateway: what an HTTPRoute rule adds to a location (the
-- agent's model.RouteRule), pushed in a location's "rule" of an "ordered"
-- route (restysync.routes):
--
--   {"case_sensitive":bool, "method":"GET",
--    "headers":[{"name","value","regex"}], "query":[{"name","value","regex"}],
--    "request_headers":{"set":[{"name","value"}],"add":[...],"remove":[name]},
--    "response_headers":{...the same...},
--    "redirect":{"scheme","host","port","path","replace_prefix","matched_prefix","status"},
--    "rewrite":{"host","path","replace_prefix","matched_prefix"},
--    "backends":[{"backend","weight","request_headers":{...}}], "status":500,
--    "timeout_ms":500, "route":"HTTPRoute ns/name",
--    "cors":{"allow_origins":["*"|"https://*.a.com"], "allow_methods":["GET"|"*"],
--            "allow_headers":[...], "expose_headers":[...],
--            "allow_credentials":bool, "max_age":5},
--    "retry":{"attempts":3, "codes":[500,503]}}
--    "mirrors":[{"backend","numerator","denominator"}]}
--
-- check_rule validates a pushed rule and returns it as it is to be
-- stored: exactly the fields it was given (false and empty ones left
-- out), so that GET /routes gives the agent back what it sent and its
-- plan sees no difference. build_rule derives, once per worker, what
-- serving needs (lower-case header names, the weights' total).
--
-- Per request, on a Gateway listener's server (restysync.router
-- .route_front): holds() says whether a location's method, header and
-- query matches hold (its regexes through the caller's budgeted find),
-- and serve() runs its filters in the spec's order: the response header
-- edits are noted for the header filter (response_headers), then a
-- redirect or a status answers, else the request headers are edited,
-- the URL rewritten, and a backend picked by weight (a share without one
-- answers 500, as the spec says), with that backend's own request header
-- edits. A rule's retry sends the request up to attempts+1 times (the
-- balancer's tries), again on the answers of its codes too: nginx retries
-- on a status its location names, so the router serves such a rule in
-- the Gateway server's location of those codes (render/gateway.go).
-- A rule's timeout_ms (its timeouts.request and backendRequest)
-- becomes its location's upstream timeouts (restysync.routes), which the
-- balancer sets. A rule's cors comes first: a preflight (OPTIONS with
-- Access-Control-Request-Method and an Origin) is answered 204 here, and
-- an allowed origin gets the Access-Control-* headers (the header filter,
-- response_headers, sets them).
--
-- A rule's mirrors copy the request, its answer ignored: mirror_backends
-- draws, per request, the mirrors it goes to (each numerator in
-- denominator), and restysync.router jumps to the Gateway server's named
-- location with that many nginx "mirror" directives, which runs the
-- router again and sends one subrequest per copy to the server's internal
-- mirror location; there restysync.router.mirror balances copy i to the
-- i-th backend (mirror_backend) like any backend (render/gateway.go).

local check = require "restysync.check"
local access = require "restysync.access"

local ngx = ngx
local ngx_var = ngx.var
local ngx_exit = ngx.exit
local ngx_redirect = ngx.redirect
local ngx_re_find = ngx.re.find
local ngx_req = ngx.req
local ngx_header = ngx.header

local ipairs = ipairs
local type = type
local tostring = tostring
local tonumber = tonumber
local math_floor = math.floor
local math_random = math.random
local string_byte = string.byte
local string_find = string.find
local string_format = string.format
local string_gmatch = string.gmatch
local string_gsub = string.gsub
local string_lower = string.lower
local string_match = string.match
local string_sub = string.sub
local table_concat = table.concat

local json_null = require("cjson").null

local _M = { _VERSION = "0.1" }

-- Limits of one rule (the spec allows 16 of each; these leave room).
local MAX_ITEMS = 64
local MAX_VALUE_BYTES = 4096
local MAX_NAME_BYTES = 256
local MAX_WEIGHT = 1000000
local HTTP_NO_CONTENT = 204
-- MAX_TIMEOUT_MS is a day, as the agent bounds timeouts.
local MAX_TIMEOUT_MS = 86400000

-- VALUE_OPTIONS: header and query values match case-sensitively, compiled
-- once per worker (o) with the JIT (j).
local VALUE_OPTIONS = "jo"

local RULE_FIELDS = { case_sensitive = true, method = true, headers = true, query = true,
    request_headers = true, response_headers = true, redirect = true, rewrite = true,
    backends = true, status = true, timeout_ms = true, cors = true, retry = true, mirrors = true, route = true }
local MATCH_FIELDS = { name = true, value = true, regex = true }
local CHANGES_FIELDS = { set = true, add = true, remove = true }
local HEADER_FIELDS = { name = true, value = true }
local REDIRECT_FIELDS = { scheme = true, host = true, port = true, path = true,
    replace_prefix = true, matched_prefix = true, status = true }
local REWRITE_FIELDS = { host = true, path = true, replace_prefix = true, matched_prefix = true }
local BACKEND_FIELDS = { backend = true, weight = true, request_headers = true, tls = true }
local MIRROR_FIELDS = { backend = true, numerator = true, denominator = true }
-- MAX_MIRRORS is how many mirrors a rule may have: the Gateway servers'
-- named locations (render/gateway.go) go up to this many copies.
local MAX_MIRRORS = 16
_M.MAX_MIRRORS = MAX_MIRRORS
-- MAX_DENOMINATOR is a fraction's largest denominator (an int32's).
local MAX_DENOMINATOR = 2147483647
-- MIRRORS_SEPARATOR joins the mirrors' backend names in
-- $restysync_mirrors (a name holds no control character).
local MIRRORS_SEPARATOR = "\n"
-- BACKEND_TLS is the name of a Gateway server's backend TLS location
-- (model.BackendTLSPrefix and 24 hex digits): the router ngx.exec()s it.
local BACKEND_TLS = "^@restysync_btls_[0-9a-f]{24}$"
local CORS_FIELDS = { allow_origins = true, allow_methods = true, allow_headers = true,
    expose_headers = true, allow_credentials = true, max_age = true }
-- CORS_ORIGIN is an origin a CORS filter allows, in lower case: its host
-- may be "*" or start with "*." (the agent checks the CRD's pattern).
local CORS_ORIGIN = "^https?://[%w%-%.%*]+$"
local CORS_ORIGIN_PORT = "^https?://[%w%-%.%*]+:%d+$"
local MAX_AGE = 2147483647
local RETRY_FIELDS = { attempts = true, codes = true }
-- RETRY_CODES are the answers nginx's proxy_next_upstream can retry on
-- (the agent's model.RetryCodes); MAX_RETRY_ATTEMPTS its bound.
local RETRY_CODES = { [403] = true, [404] = true, [429] = true, [500] = true, [502] = true, [503] = true, [504] = true }
local MAX_RETRY_ATTEMPTS = 10
-- RETRY_LOCATION begins the name of a Gateway server's location of retry
-- codes (render/gateway.go): "@restysync_retry_500_503".
local RETRY_LOCATION = "@restysync_retry"
local METHODS = { GET = true, HEAD = true, POST = true, PUT = true, DELETE = true,
    CONNECT = true, OPTIONS = true, TRACE = true, PATCH = true }
local REDIRECT_STATUSES = { [301] = true, [302] = true, [303] = true, [307] = true, [308] = true }
local SCHEMES = { http = 80, https = 443 }

-- HEADER_NAME is an HTTP token (RFC 9110).
local HEADER_NAME = "^[%w!#%$%%&'%*%+%-%.%^_`|~]+$"

-- Validation -------------------------------------------------------------

local function absent(v)
    return v == nil or v == json_null
end

-- object returns v if it is a JSON object of only the fields allowed, or
-- nil and the reason, naming at.
local function object(v, at, allowed)
    if not check.is_object(v) then
        return nil, at .. ": must be an object"
    end
    local field = check.unknown_field(v, allowed)
    if field then
        return nil, at .. "." .. tostring(field) .. ": unknown field"
    end
    return v
end

-- list returns the length of the array v (bounded), or nil and the reason.
local function list(v, at)
    local n = check.array_length(v)
    if not n then
        return nil, at .. ": must be an array"
    end
    if n > MAX_ITEMS then
        return nil, string_format("%s: has %d entries, more than %d", at, n, MAX_ITEMS)
    end
    return n
end

-- text returns why v (at at) is not a string of at most max bytes without
-- control characters, or nil.
local function text(v, at, max)
    if type(v) ~= "string" then
        return at .. ": must be a string"
    end
    if #v > max then
        return string_format("%s: is %d bytes long, longer than %d", at, #v, max)
    end
    if string_find(v, "%c") then
        return at .. ": must not contain control characters"
    end
    return nil
end

local function header_name(v, at)
    if type(v) ~= "string" or #v > MAX_NAME_BYTES or not string_match(v, HEADER_NAME) then
        return at .. ": must be an HTTP header name"
    end
    return nil
end

-- boolean returns true, or nil for false and absent (left out of what is
-- stored), or false and the reason.
local function boolean(v, at)
    if absent(v) or v == false then
        return nil
    end
    if v ~= true then
        return false, at .. ": must be true or false"
    end
    return true
end

-- whole returns why v (at at) is not a whole number from min to max, or nil.
local function whole(v, at, min, max)
    if type(v) ~= "number" or v ~= math_floor(v) or v < min or v > max then
        return string_format("%s: must be a whole number from %d to %d", at, min, max)
    end
    return nil
end

-- path returns why v (at at) is not a URL path: "/" first, no control
-- character or space, bounded.
local function path(v, at)
    local err = text(v, at, MAX_VALUE_BYTES)
    if err then
        return err
    end
    if string_byte(v, 1) ~= 47 then -- "/"
        return at .. ': must start with "/"'
    end
    if string_find(v, " ", 1, true) then
        return at .. ": must not contain spaces"
    end
    return nil
end

-- each validates an array, each item by check_one(item, at, n), which
-- returns what to store or nil and the reason. It returns the stored
-- list, nil for an empty one, or nil and the reason.
local function each(v, at, check_one)
    local n, err = list(v, at)
    if not n then
        return nil, err
    end
    if n == 0 then
        return nil
    end
    local out = {}
    for i = 1, n do
        local item
        item, err = check_one(v[i], string_format("%s[%d]", at, i - 1), n)
        if not item then
            return nil, err
        end
        out[i] = item
    end
    return out
end

-- objects validates an array of objects with the fields allowed, each
-- by check_one(item, at), as each does.
local function objects(v, at, allowed, check_one)
    return each(v, at, function(item, iat)
        local o, err = object(item, iat, allowed)
        if not o then
            return nil, err
        end
        return check_one(o, iat)
    end)
end

-- check_value validates the value and regex of one header or query
-- parameter match (check_header_match, check_query_match) and returns
-- the match as stored.
local function check_value(m, at)
    local err = text(m.value, at .. ".value", MAX_VALUE_BYTES)
    if err then
        return nil, err
    end
    local regex
    regex, err = boolean(m.regex, at .. ".regex")
    if regex == false then
        return nil, err
    end
    if regex then
        local _, _, rerr = ngx_re_find("", m.value, VALUE_OPTIONS)
        if rerr then
            return nil, at .. ".value: not a regex PCRE compiles: " .. tostring(rerr)
        end
    end
    return { name = m.name, value = m.value, regex = regex }
end

local function check_header_match(m, at)
    local err = header_name(m.name, at .. ".name")
    if err then
        return nil, err
    end
    return check_value(m, at)
end

local function check_query_match(m, at)
    local err = text(m.name, at .. ".name", MAX_NAME_BYTES)
    if not err and m.name == "" then
        err = at .. ".name: must not be empty"
    end
    if err then
        return nil, err
    end
    return check_value(m, at)
end

-- check_header validates one {name, value} to set or add.
local function check_header(h, at)
    local err = header_name(h.name, at .. ".name") or text(h.value, at .. ".value", MAX_VALUE_BYTES)
    if err then
        return nil, err
    end
    return { name = h.name, value = h.value }
end

-- check_changes validates request_headers or response_headers.
local function check_changes(v, at)
    local c, err = object(v, at, CHANGES_FIELDS)
    if not c then
        return nil, err
    end
    local out = {}
    for _, field in ipairs({ "set", "add" }) do
        if not absent(c[field]) then
            local hs, herr = objects(c[field], at .. "." .. field, HEADER_FIELDS, check_header)
            if herr then
                return nil, herr
            end
            out[field] = hs
        end
    end
    if not absent(c.remove) then
        local n, lerr = list(c.remove, at .. ".remove")
        if not n then
            return nil, lerr
        end
        if n > 0 then
            out.remove = {}
            for i = 1, n do
                err = header_name(c.remove[i], string_format("%s.remove[%d]", at, i - 1))
                if err then
                    return nil, err
                end
                out.remove[i] = c.remove[i]
            end
        end
    end
    if not out.set and not out.add and not out.remove then
        return nil, at .. ": has no change"
    end
    return out
end

-- check_url validates the host and path fields a redirect and a rewrite
-- share into out.
local function check_url(v, at, out)
    if not absent(v.host) then
        if not check.is_dns_name(v.host) then
            return at .. ".host: must be a lower-case DNS name"
        end
        out.host = v.host
    end
    local replace, err = boolean(v.replace_prefix, at .. ".replace_prefix")
    if replace == false then
        return err
    end
    if not absent(v.path) then
        err = path(v.path, at .. ".path")
        if err then
            return err
        end
        out.path = v.path
    end
    if replace then
        if not out.path then
            return at .. ".replace_prefix: needs a path"
        end
        err = path(v.matched_prefix, at .. ".matched_prefix")
        if err then
            return err
        end
        out.replace_prefix, out.matched_prefix = true, v.matched_prefix
    elseif not absent(v.matched_prefix) then
        return at .. ".matched_prefix: only with replace_prefix"
    end
    return nil
end

local function check_redirect(v, at)
    local rd, err = object(v, at, REDIRECT_FIELDS)
    if not rd then
        return nil, err
    end
    local out = {}
    if not absent(rd.scheme) then
        if not SCHEMES[rd.scheme] then
            return nil, at .. '.scheme: must be "http" or "https"'
        end
        out.scheme = rd.scheme
    end
    if not absent(rd.port) then
        err = whole(rd.port, at .. ".port", 1, 65535)
        if err then
            return nil, err
        end
        out.port = rd.port
    end
    err = check_url(rd, at, out)
    if err then
        return nil, err
    end
    if not REDIRECT_STATUSES[rd.status] then
        return nil, at .. ".status: must be 301, 302, 303, 307 or 308"
    end
    out.status = rd.status
    return out
end

local function check_rewrite(v, at)
    local rw, err = object(v, at, REWRITE_FIELDS)
    if not rw then
        return nil, err
    end
    local out = {}
    err = check_url(rw, at, out)
    if err then
        return nil, err
    end
    if not out.host and not out.path then
        return nil, at .. ": rewrites nothing"
    end
    return out
end

-- strings validates an array of strings, each by valid(v, at) (nil when
-- good), "*" allowed alone, as each does.
local function strings(v, at, valid)
    return each(v, at, function(item, iat, n)
        if item == "*" then
            return n == 1 and item or nil, iat .. ': "*" must be the only entry'
        end
        local err = valid(item, iat)
        if err then
            return nil, err
        end
        return item
    end)
end

-- cors_origin returns why v (at at) is not an origin a CORS filter may
-- allow (only letters, digits, "-", "." and "*" in its host), or nil.
local function cors_origin(v, at)
    if type(v) == "string" and #v <= MAX_NAME_BYTES and v == string_lower(v)
        and (string_match(v, CORS_ORIGIN) or string_match(v, CORS_ORIGIN_PORT)) then
        return nil
    end
    return at .. ": must be a lower-case origin scheme://host[:port]"
end

local function cors_method(v, at)
    return not METHODS[v] and at .. ": must be an HTTP method" or nil
end

-- check_cors validates a rule's cors and returns it as stored.
local function check_cors(v, at)
    local out, c, err = {}, object(v, at, CORS_FIELDS)
    if not c then
        return nil, err
    end
    for _, f in ipairs({
        { "allow_origins", cors_origin }, { "allow_methods", cors_method },
        { "allow_headers", header_name }, { "expose_headers", header_name },
    }) do
        local field = f[1]
        if not absent(c[field]) then
            out[field], err = strings(c[field], at .. "." .. field, f[2])
            if err then
                return nil, err
            end
        end
    end
    out.allow_credentials, err = boolean(c.allow_credentials, at .. ".allow_credentials")
    if out.allow_credentials == false then
        return nil, err
    end
    err = whole(c.max_age, at .. ".max_age", 1, MAX_AGE)
    if err then
        return nil, err
    end
    out.max_age = c.max_age
    return out
end

-- check_backend validates one weighted backend ("" or absent: a share
-- that answers 500).
local function check_backend(b, at)
    local name
    if not absent(b.backend) and b.backend ~= "" then
        local err = check.name(b.backend, at .. ".backend")
        if err then
            return nil, err
        end
        name = b.backend
    end
    local err = whole(b.weight, at .. ".weight", 0, MAX_WEIGHT)
    if err then
        return nil, err
    end
    local headers
    if not absent(b.request_headers) then
        headers, err = check_changes(b.request_headers, at .. ".request_headers")
        if not headers then
            return nil, err
        end
    end
    local tls
    if not absent(b.tls) then
        if type(b.tls) ~= "string" or not ngx_re_find(b.tls, BACKEND_TLS, "jo") then
            return nil, at .. ".tls: not the name of a backend TLS location"
        end
        tls = b.tls
    end
    return { backend = name, weight = b.weight, request_headers = headers, tls = tls }
end

-- check_retry validates a rule's retry: {"attempts":3, "codes":[500,503]},
-- the codes sorted, each once and one nginx can retry on.
local function check_retry(v, at)
    local r, err = object(v, at, RETRY_FIELDS)
    if not r then
        return nil, err
    end
    err = whole(r.attempts, at .. ".attempts", 1, MAX_RETRY_ATTEMPTS)
    if err then
        return nil, err
    end
    local out = { attempts = r.attempts }
    if not absent(r.codes) then
        local last = 0
        out.codes, err = each(r.codes, at .. ".codes", function(c, cat)
            local cerr = whole(c, cat, 400, 599)
            if cerr then
                return nil, cerr
            end
            if not RETRY_CODES[c] then
                return nil, cat .. ": must be one of 403, 404, 429, 500, 502, 503, 504 (nginx retries on these only)"
            end
            if c <= last then
                return nil, cat .. ": the codes must be sorted, each once"
            end
            last = c
            return c
        end)
        if err then
            return nil, err
        end
    end
    return out
end

-- check_mirror validates one mirror: a backend name without control
-- characters, and a share numerator/denominator of at least 1 in 1.
local function check_mirror(m, at)
    local err = check.name(m.backend, at .. ".backend") or text(m.backend, at .. ".backend", check.MAX_NAME_BYTES)
        or whole(m.denominator, at .. ".denominator", 1, MAX_DENOMINATOR)
    if err then
        return nil, err
    end
    err = whole(m.numerator, at .. ".numerator", 1, m.denominator)
    if err then
        return nil, err
    end
    return { backend = m.backend, numerator = m.numerator, denominator = m.denominator }
end

-- RULE_OBJECTS are the object fields of a rule, each with its check.
local RULE_OBJECTS = {
    { "request_headers", check_changes }, { "response_headers", check_changes },
    { "redirect", check_redirect }, { "rewrite", check_rewrite }, { "cors", check_cors },
    { "retry", check_retry },
}

-- check_rule validates one location's rule (at at) and returns it as it
-- is to be stored, or nil and the reason, naming the field.
function _M.check_rule(v, at)
    local rule, err = object(v, at, RULE_FIELDS)
    if not rule then
        return nil, err
    end
    local out = {}
    out.case_sensitive, err = boolean(rule.case_sensitive, at .. ".case_sensitive")
    if out.case_sensitive == false then
        return nil, err
    end
    if not absent(rule.method) then
        if not METHODS[rule.method] then
            return nil, at .. ".method: must be an HTTP method the Gateway API names (GET, POST, ...)"
        end
        out.method = rule.method
    end
    if not absent(rule.headers) then
        out.headers, err = objects(rule.headers, at .. ".headers", MATCH_FIELDS, check_header_match)
        if err then
            return nil, err
        end
    end
    if not absent(rule.query) then
        out.query, err = objects(rule.query, at .. ".query", MATCH_FIELDS, check_query_match)
        if err then
            return nil, err
        end
    end
    for _, f in ipairs(RULE_OBJECTS) do
        local field = f[1]
        if not absent(rule[field]) then
            out[field], err = f[2](rule[field], at .. "." .. field)
            if not out[field] then
                return nil, err
            end
        end
    end
    if out.redirect and out.rewrite then
        return nil, at .. ": must not both redirect and rewrite"
    end
    if not absent(rule.backends) then
        out.backends, err = objects(rule.backends, at .. ".backends", BACKEND_FIELDS, check_backend)
        if err then
            return nil, err
        end
    end
    if not absent(rule.mirrors) then
        out.mirrors, err = objects(rule.mirrors, at .. ".mirrors", MIRROR_FIELDS, check_mirror)
        if err then
            return nil, err
        end
        if out.mirrors and #out.mirrors > MAX_MIRRORS then
            return nil, string_format("%s.mirrors: has %d entries, more than %d", at, #out.mirrors, MAX_MIRRORS)
        end
    end
    if not absent(rule.status) then
        err = whole(rule.status, at .. ".status", 200, 599)
        if err then
            return nil, err
        end
        out.status = rule.status
    end
    if not absent(rule.timeout_ms) then
        err = whole(rule.timeout_ms, at .. ".timeout_ms", 1, MAX_TIMEOUT_MS)
        if err then
            return nil, err
        end
        out.timeout_ms = rule.timeout_ms
    end
    if not absent(rule.route) then
        err = check.name(rule.route, at .. ".route")
        if err then
            return nil, err
        end
        out.route = rule.route
    end
    return out
end

-- answers reports whether a checked rule answers by itself or names its
-- backends: its location then needs no backend of its own.
function _M.answers(rule)
    return rule.redirect ~= nil or rule.status ~= nil or rule.backends ~= nil
end

-- Serving ----------------------------------------------------------------

-- build_rule adds to a decoded rule what serving needs: the header
-- matches' names in lower case (ngx.req.get_headers' keys), the weights'
-- total, whether any match is to be checked; and compiles its regexes
-- into the worker's cache, so that a request's budget pays for matching
-- only.
function _M.build_rule(rule)
    for _, m in ipairs(rule.headers or {}) do
        m.key = string_lower(m.name)
        if m.regex then
            ngx_re_find("", m.value, VALUE_OPTIONS)
        end
    end
    for _, m in ipairs(rule.query or {}) do
        if m.regex then
            ngx_re_find("", m.value, VALUE_OPTIONS)
        end
    end
    rule.matches = rule.method ~= nil or rule.headers ~= nil or rule.query ~= nil
    local cors = rule.cors
    if cors then
        -- The header values, joined once; nil for "*" (the request's are
        -- echoed) and for none.
        local function joined(l)
            if l and l[1] ~= "*" then
                return table_concat(l, ", ")
            end
        end
        cors.any_origin = cors.allow_origins ~= nil and cors.allow_origins[1] == "*"
        cors.methods = joined(cors.allow_methods)
        cors.any_method = cors.allow_methods ~= nil and cors.methods == nil
        cors.headers = joined(cors.allow_headers)
        cors.any_header = cors.allow_headers ~= nil and cors.headers == nil
        -- "*" exposes every header, but not to a request with credentials.
        cors.expose = joined(cors.expose_headers)
        if cors.expose_headers and not cors.expose and not cors.allow_credentials then
            cors.expose = "*"
        end
        cors.max_age_value = tostring(cors.max_age)
    end
    if rule.backends then
        local total = 0
        for _, b in ipairs(rule.backends) do
            total = total + b.weight
        end
        rule.total_weight = total
    end
    local retry = rule.retry
    if retry then
        -- tries: the first and the retries; location: the Gateway
        -- server's location of the codes, where nginx retries on them.
        retry.tries = retry.attempts + 1
        if retry.codes then
            retry.location = RETRY_LOCATION .. "_" .. table_concat(retry.codes, "_")
        end
    end
    return rule
end

-- first is the first value of a header or query parameter as
-- ngx.req.get_headers and get_uri_args give it: a list for a repeated one,
-- true for a query parameter without "=".
local function first(v)
    if type(v) == "table" then
        v = v[1]
    end
    if v == true then
        return ""
    end
    return v
end

-- value_holds says whether value (nil: absent) satisfies the match m, or
-- returns nil, the pattern and why a regex could not decide.
local function value_holds(m, value, find)
    if value == nil then
        return false
    end
    if not m.regex then
        return value == m.value
    end
    local from, pattern, err = find(value, m.value, VALUE_OPTIONS)
    if err then
        return nil, pattern, err
    end
    return from ~= nil
end

-- holds says whether the method, header and query matches of rule hold
-- for this request: true or false, or nil, the pattern and the reason
-- when a regex could not decide. find(subject, pattern, options) is the
-- caller's budgeted regex search (restysync.routes). A repeated header is
-- seen joined with ", " (RFC 9110), a repeated query parameter by its
-- first value, as the spec has it.
function _M.holds(rule, find)
    if rule.method and ngx_req.get_method() ~= rule.method then
        return false
    end
    local matches = rule.headers
    if matches then
        local headers = ngx_req.get_headers()
        for i = 1, #matches do
            local m = matches[i]
            local v = headers[m.key]
            if type(v) == "table" then
                v = table_concat(v, ", ")
            end
            local ok, pattern, err = value_holds(m, v, find)
            if not ok then
                return ok, pattern, err
            end
        end
    end
    matches = rule.query
    if matches then
        local args = ngx_req.get_uri_args()
        for i = 1, #matches do
            local m = matches[i]
            local ok, pattern, err = value_holds(m, first(args[m.name]), find)
            if not ok then
                return ok, pattern, err
            end
        end
    end
    return true
end

-- origin_allowed says whether a CORS filter allows origin: "*" any, an
-- origin equal to one allowed (case-insensitively), or one whose host
-- ends in what follows a "*" of an allowed one's host ("https://*.a.com"
-- allows "https://b.c.a.com", not "https://a.com").
local function origin_allowed(cors, origin)
    if cors.any_origin then
        return true
    end
    local allowed = cors.allow_origins
    if not allowed then
        return false
    end
    origin = string_lower(origin)
    for i = 1, #allowed do
        local o = allowed[i]
        if o == origin then
            return true
        end
        local star = string_find(o, "://*", 1, true)
        if star then
            local prefix, suffix = string_sub(o, 1, star + 2), string_sub(o, star + 4)
            if #origin > #prefix + #suffix and string_sub(origin, 1, #prefix) == prefix
                and string_sub(origin, #origin - #suffix + 1) == suffix then
                return true
            end
        end
    end
    return false
end

-- cors_request runs a rule's CORS filter: an allowed origin's answer gets
-- the Access-Control-* headers (noted for response_headers). It returns
-- true for a preflight, which the caller answers 204, with them or, for
-- an origin not allowed, without.
local function cors_request(cors)
    local origin = ngx_var.http_origin
    if not origin or origin == "" then
        return false
    end
    local preflight = ngx_req.get_method() == "OPTIONS" and ngx_var.http_access_control_request_method ~= nil
    if origin_allowed(cors, origin) then
        ngx.ctx.restysync_cors = { cors = cors, origin = origin, preflight = preflight }
    end
    return preflight
end

-- cors_headers sets the Access-Control-* headers of an allowed origin's
-- answer (c: what cors_request noted).
local function cors_headers(c)
    local cors = c.cors
    ngx_header["Access-Control-Allow-Origin"] = c.origin
    access.add_vary_origin()
    if cors.allow_credentials then
        ngx_header["Access-Control-Allow-Credentials"] = "true"
    end
    if cors.expose then
        ngx_header["Access-Control-Expose-Headers"] = cors.expose
    end
    if not c.preflight then
        return
    end
    local methods = cors.methods
    if cors.any_method then
        methods = ngx_var.http_access_control_request_method
    end
    ngx_header["Access-Control-Allow-Methods"] = methods
    local headers = cors.headers
    if cors.any_header then
        headers = ngx_var.http_access_control_request_headers
    end
    ngx_header["Access-Control-Allow-Headers"] = headers
    ngx_header["Access-Control-Max-Age"] = cors.max_age_value
end

-- replace_prefix is path with its matched prefix (an element-wise prefix
-- of path, see restysync.routes) replaced by with: "/a/b" with "/a"
-- replaced by "/x" is "/x/b", by "/" is "/b"; never empty.
local function replace_prefix(uri, matched, with)
    if #matched > 1 and string_byte(matched, -1) == 47 then -- "/"
        matched = string_sub(matched, 1, -2)
    end
    local rest = matched == "/" and uri or string_sub(uri, #matched + 1)
    if string_byte(with, -1) == 47 and string_byte(rest, 1) == 47 then
        with = string_sub(with, 1, -2)
    end
    local out = with .. rest
    if out == "" then
        return "/"
    end
    return out
end

-- escape_unsafe percent-encodes the bytes a Location header must not hold
-- raw ($uri is decoded: a "%0d%0a" in the request is a line break there).
local function escape_unsafe(s)
    return (string_gsub(s, "[%c %z\127-\255]", function(c)
        return string_format("%%%02X", string_byte(c))
    end))
end

-- new_path is the path a redirect or rewrite with a path makes of uri.
local function new_path(change, uri)
    if change.replace_prefix then
        return replace_prefix(uri, change.matched_prefix, change.path)
    end
    return change.path
end

-- redirect answers the request with the rule's redirect. The port is the
-- redirect's, else the scheme's own when the redirect sets a scheme, else
-- the listener's; it is left out of the URL when it is the scheme's own
-- (the spec's RequestRedirect.port).
local function redirect(rd, uri)
    local scheme = rd.scheme or ngx_var.scheme
    local port = rd.port or (rd.scheme and SCHEMES[rd.scheme]) or ngx_var.server_port
    port = tostring(port)
    local target = scheme .. "://" .. (rd.host or ngx_var.host)
    if SCHEMES[scheme] ~= tonumber(port) then
        target = target .. ":" .. port
    end
    if rd.path then
        target = target .. escape_unsafe(new_path(rd, uri))
        local args = ngx_var.args
        if args and args ~= "" then
            target = target .. "?" .. args
        end
    else
        target = target .. ngx_var.request_uri
    end
    return ngx_redirect(target, rd.status)
end

-- edit_headers applies c's set, add and remove through get(name) and
-- put(name, value), put(name, nil) removing: the request's headers or the
-- response's. An added value is appended to the one there, after a ",".
local function edit_headers(c, get, put)
    local set = c.set
    if set then
        for i = 1, #set do
            put(set[i].name, set[i].value)
        end
    end
    local add = c.add
    if add then
        for i = 1, #add do
            local h = add[i]
            local old = get(h.name)
            if type(old) == "table" then
                old = table_concat(old, ",")
            end
            put(h.name, old and old .. "," .. h.value or h.value)
        end
    end
    local remove = c.remove
    if remove then
        for i = 1, #remove do
            put(remove[i], nil)
        end
    end
end

-- request_header is the request's header name (a list when repeated).
local function request_header(name)
    return ngx_req.get_headers()[name]
end

local function response_header(name)
    return ngx_header[name]
end

local function set_response_header(name, value)
    ngx_header[name] = value
end

-- pick returns one share of rule's backends, by weight: {backend,
-- weight, request_headers}, its backend nil for a share without a usable
-- one; or nil when every weight is 0.
local function pick(rule)
    local total = rule.total_weight
    if total == 0 then
        return nil
    end
    local backends = rule.backends
    local n = math_random(total)
    for i = 1, #backends do
        n = n - backends[i].weight
        if n <= 0 then
            return backends[i]
        end
    end
    return nil
end

-- serve runs the filters of loc's rule for this request (uri is $uri):
-- a CORS preflight, a redirect or a status answers here (ngx.redirect and ngx.exit end the
-- handler); else it returns the backend to balance, or nil for a share
-- without one (the caller answers 500), and the backend TLS location the
-- share is proxied through, if any.
function _M.serve(loc, uri)
    local rule = loc.rule
    local name = loc.backend
    if rule then
        if rule.cors and cors_request(rule.cors) then
            return ngx_exit(HTTP_NO_CONTENT)
        end
        if rule.response_headers then
            ngx.ctx.restysync_response_headers = rule.response_headers
        end
        if rule.redirect then
            return redirect(rule.redirect, uri)
        end
        if rule.status then
            return ngx_exit(rule.status)
        end
        if rule.request_headers then
            -- ngx.req.set_header with nil removes the header.
            edit_headers(rule.request_headers, request_header, ngx_req.set_header)
        end
        local rw = rule.rewrite
        if rw then
            if rw.host then
                ngx_var.restysync_upstream_host = rw.host
            end
            if rw.path then
                ngx_req.set_uri(new_path(rw, uri))
            end
        end
        if rule.backends then
            local share = pick(rule)
            name = share and share.backend
            if name and share.request_headers then
                edit_headers(share.request_headers, request_header, ngx_req.set_header)
            end
            return name, name and share.tls
        end
    end
    return name
end

-- mirror_backends draws the mirrors of rule this request goes to, each
-- by its own share: it returns their backends joined by
-- MIRRORS_SEPARATOR and how many, or nil for none.
function _M.mirror_backends(rule)
    local mirrors = rule.mirrors
    local names, n
    for i = 1, #mirrors do
        local m = mirrors[i]
        if m.numerator >= m.denominator or math_random(m.denominator) <= m.numerator then
            n = (n or 0) + 1
            names = names and names .. MIRRORS_SEPARATOR .. m.backend or m.backend
        end
    end
    return names, n
end

-- mirror_backend returns the i-th backend of names (mirror_backends'
-- string), or nil.
function _M.mirror_backend(names, i)
    local n = 0
    for name in string_gmatch(names, "[^\n]+") do
        n = n + 1
        if n == i then
            return name
        end
    end
    return nil
end

-- response_headers applies the response header edits of the location
-- that served this request, if it has any: call it from the Gateway
-- location's header_filter_by_lua_block.
function _M.response_headers()
    local ctx = ngx.ctx
    local c = ctx.restysync_response_headers
    if c then
        edit_headers(c, response_header, set_response_header)
    end
    c = ctx.restysync_cors
    if c then
        cors_headers(c)
    end
end

-- Private functions, reachable by tests.
setmetatable(_M, { __index = {
    replace_prefix = replace_prefix,
    origin_allowed = origin_allowed,
} })

return _M
