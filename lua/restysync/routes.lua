-- restysync.routes: every host's paths, in place of nginx's server blocks.
--
-- Every host is routed here (see the agent's render/profiles.go), so that a
-- new or changed Ingress is a push, not a reload. The agent pushes each
-- host's locations in nginx's terms (POST /routes, see restysync.api); they
-- live in the shared dict:
--
--   rt:<host>       the route, compact JSON: {"https":bool,"locations":
--                   [{"path","exact","regex","backend","ssl_redirect",
--                     "connect_timeout","send_timeout","read_timeout",
--                     "profile","ingress","auth_file","max_body",
--                     "preserve_trailing_slash","redirect_host","noregex",
--                     "loop_guard","metric"}, ...]}
--                   ("metric": the request metrics' labels of the
--                   location, see restysync.requests)
--                   ("loop_guard": the location sends auth or mirror
--                   requests to a tenant's URL, see restysync.loop)
--                   ("backend" is absent for a location that answers by
--                   itself, a server-snippet's, which has a "profile")
--                   (an ordered route, a Gateway listener's, has
--                   "ordered":true, its listener's hostname in
--                   "listener" (absent for one without), and its
--                   locations "rule" objects, see below and
--                   restysync.gateway)
--   routes          how many hosts there are
--   routes_version  the version at which any route last changed
--
-- A host is an exact name, a wildcard "*.example.com" (exactly one more
-- label, as Ingress has it), or "_": the default server's locations, for
-- every host without a route of its own.
--
-- A Gateway listener's routes (the agent's model.FrontKey) are named by
-- the listener's front ("127.0.50.1:80", "[fd00::1]:443"), a space and a
-- host: an exact name, a wildcard "*.example.com" that matches any number
-- of labels, or "_" for the front's every other host. Such a route is
-- "ordered": its locations come in the Gateway API's precedence and a
-- request takes the first whose path and rule hold (match_ordered); a
-- prefix path matches element-wise ("/p" is "/p" and "/p/..."), a regex
-- case-insensitively unless its rule is case_sensitive. Its locations
-- hold a path, exact or regex, a backend, timeouts and a "rule"
-- (restysync.gateway), nothing of an Ingress's (profiles, redirects).
--
-- The default server's "location /" calls restysync.router.route(), which
-- looks the request's host up here (exact, then wildcard, then "_") and
-- matches its path as nginx matches locations: an exact location first;
-- else the longest prefix is remembered and the regexes (case-insensitive,
-- in the order pushed) are tried, the first match winning; else the
-- longest prefix. The regexes of one request share a budget (see
-- "Regex budget" below): a regex PCRE fails to run, or a search that
-- spends the budget, is a failure, never "no match". A host is routed by
-- its own locations over HTTP and HTTPS alike: "https" (the host has TLS
-- of its own) is kept for the agent's and /debug's view and decides
-- nothing here (a host without TLS is served over HTTPS with the default
-- certificate, as ingress-nginx does; the HTTPS redirect is each
-- location's "ssl_redirect"); a location with "ssl_redirect" answers plain HTTP with a 308 to HTTPS (the
-- URI's trailing "/" dropped, as ingress-nginx does, unless
-- "preserve_trailing_slash"); one with "redirect_host" answers every request
-- with a 308 to that host (from-to-www-redirect); a
-- location's timeouts (seconds) are set on the request by the balancer; a
-- location with a "profile" is served by that named location of nginx.conf.
-- Each worker keeps the hosts it has served decoded, and drops them all
-- when routes_version moves: routes change with the structure, seldom.

local cjson = require "cjson"
local ffi = require "ffi"
local restysync = require "restysync"
local check = require "restysync.check"
local gateway = require "restysync.gateway"
local store = require "restysync.store"

local ngx = ngx
local ngx_re_find = ngx.re.find
local ngx_log = ngx.log
local ngx_ERR = ngx.ERR

local ipairs = ipairs
local pcall = pcall
local type = type
local tonumber = tonumber
local tostring = tostring
local math_floor = math.floor
local string_byte = string.byte
local string_find = string.find
local string_gsub = string.gsub
local select = select
local string_format = string.format
local string_match = string.match
local string_sub = string.sub
local table_concat = table.concat
local table_sort = table.sort

local _M = { _VERSION = "0.1" }

-- Limits of one route.
local MAX_LOCATIONS = 10000
local MAX_PATH_BYTES = 4096
local MAX_TIMEOUT_SECONDS = 24 * 3600
local MAX_BODY_BYTES = 2 ^ 53

-- PROFILE is the shape of a profile's name: "@restysync_p_" and the 32 hex
-- digits (128 bits) of the agent's hash of its body (render/names.go).
local PROFILE = "^@restysync_p_" .. string.rep("[0-9a-f]", 32) .. "$"

-- DEFAULT is the route of the default server's locations.
local DEFAULT = "_"
_M.DEFAULT = DEFAULT

-- REGEX_OPTIONS: case-insensitive as nginx's "location ~*", compiled once
-- per worker (o) with the JIT (j).
local REGEX_OPTIONS = "joi"

local json = cjson.new()
json.decode_max_depth(16)
local json_null = json.null
local json_encode = json.encode

local array_length = check.array_length
local is_object = check.is_object
local unknown_field = check.unknown_field

-- Validation -------------------------------------------------------------

-- The checks below build the name of a field (upserts[3].locations[0].exact)
-- only when it is at fault: a push of 50,000 routes checks some twenty
-- fields of each, and building every name up front was most of its cost.

-- lat names location i (from 1) of the locations at at.
local function lat(at, i)
    return string_format("%s[%d]", at, i - 1)
end

-- field_name is at .. field, or, with i, the field of location i of at.
local function field_name(at, field, i)
    if i then
        return lat(at, i) .. field
    end
    return at .. field
end

-- check_path returns why path (at at) is not a location path, or nil: it
-- starts with "/", holds no control character or space, and is bounded.
-- It names at the field of location i of at (field_name), built only on
-- a fault.
local function check_path(path, at, field, i)
    if type(path) == "string" and string_byte(path, 1) == 47 and #path <= MAX_PATH_BYTES
        and not string_find(path, "[%c ]") then
        return nil
    end
    at = field_name(at, field, i)
    if type(path) ~= "string" then
        return at .. ": must be a string"
    end
    if string_byte(path, 1) ~= 47 then -- "/"
        return at .. ': must start with "/"'
    end
    if #path > MAX_PATH_BYTES then
        return string_format("%s: is %d bytes long, longer than %d", at, #path, MAX_PATH_BYTES)
    end
    if string_find(path, "[%c ]") then
        return at .. ": must not contain control characters or spaces"
    end
    return nil
end

local ROUTE_FIELDS = { name = true, https = true, locations = true, ordered = true, listener = true }
local LOCATION_FIELDS = { path = true, exact = true, regex = true, backend = true, ssl_redirect = true,
    connect_timeout = true, send_timeout = true, read_timeout = true,
    profile = true, ingress = true, auth_file = true, max_body = true,
    preserve_trailing_slash = true, redirect_host = true, noregex = true, loop_guard = true, rule = true,
    metric = true }
-- ORDERED_FIELDS are those a location of an ordered route may hold.
local ORDERED_FIELDS = { path = true, exact = true, regex = true, backend = true,
    connect_timeout = true, send_timeout = true, read_timeout = true, rule = true, metric = true }
-- MAX_METRIC_BYTES bounds a location's "metric" labels.
local MAX_METRIC_BYTES = 1024

local is_front = check.is_front
local TIMEOUTS = { "connect_timeout", "send_timeout", "read_timeout" }
local TIMEOUT_FIELDS = { ".connect_timeout", ".send_timeout", ".read_timeout" } -- as field_name takes them

-- flag returns the boolean v (false when absent or null), or nil and the
-- reason, naming the field (field_name).
local function flag(v, at, field, i)
    if v == nil or v == json_null then
        return false
    end
    if type(v) ~= "boolean" then
        return nil, field_name(at, field, i) .. ": must be true or false"
    end
    return v
end

-- seconds returns the timeout v in whole seconds (false when absent or
-- null), or nil and the reason, naming the field (field_name).
local function seconds(v, at, field, i)
    if v == nil or v == json_null then
        return false
    end
    if type(v) ~= "number" or v ~= math_floor(v) or v < 1 or v > MAX_TIMEOUT_SECONDS then
        return nil, string_format("%s: must be a whole number of seconds from 1 to %d", field_name(at, field, i), MAX_TIMEOUT_SECONDS)
    end
    return v
end

-- check_locations validates the locations of one route (ordered: a
-- Gateway listener's) and returns them as the JSON stored in rt:<host>,
-- or nil and the reason.
local function check_locations(locations, at, ordered)
    local n = array_length(locations)
    if not n then
        return nil, at .. ": must be an array"
    end
    -- An ordered route without locations is a Gateway listener's host
    -- with no route attached: it answers 404 and keeps the lookup from
    -- a less specific key (listener isolation).
    if n == 0 and not ordered then
        return nil, at .. ": must not be empty"
    end
    if n > MAX_LOCATIONS then
        return nil, string_format("%s: has %d locations, more than %d", at, n, MAX_LOCATIONS)
    end
    local seen, parts = {}, {}
    for i = 1, n do
        local loc = locations[i]
        if not is_object(loc) then
            return nil, lat(at, i) .. ": must be an object"
        end
        local field = unknown_field(loc, LOCATION_FIELDS)
        if field then
            return nil, lat(at, i) .. "." .. tostring(field) .. ": unknown field"
        end
        field = ordered and unknown_field(loc, ORDERED_FIELDS)
        if field then
            return nil, lat(at, i) .. "." .. tostring(field) .. ": not in an ordered route's location"
        end
        local rule
        if loc.rule ~= nil and loc.rule ~= json_null then
            if not ordered then
                return nil, lat(at, i) .. ".rule: only in an ordered route's location"
            end
            local rerr
            rule, rerr = gateway.check_rule(loc.rule, lat(at, i) .. ".rule")
            if not rule then
                return nil, rerr
            end
        end
        if type(loc.path) ~= "string" then
            return nil, lat(at, i) .. ".path: must be a string"
        end
        local err
        local exact, ferr = flag(loc.exact, at, ".exact", i)
        if exact == nil then
            return nil, ferr
        end
        local redirect
        redirect, ferr = flag(loc.ssl_redirect, at, ".ssl_redirect", i)
        if redirect == nil then
            return nil, ferr
        end
        local regex
        regex, ferr = flag(loc.regex, at, ".regex", i)
        if regex == nil then
            return nil, ferr
        end
        if regex then
            if exact then
                return nil, lat(at, i) .. ": must not be both exact and a regex"
            end
            if string_byte(loc.path, 1) ~= 94 or (not ordered and string_byte(loc.path, 2) ~= 47) then -- "^/"
                return nil, lat(at, i) .. (ordered and '.path: a regex must start with "^"' or '.path: a regex must start with "^/"')
            end
            if #loc.path > MAX_PATH_BYTES then
                return nil, string_format("%s.path: is %d bytes long, longer than %d", lat(at, i), #loc.path, MAX_PATH_BYTES)
            end
            if string_find(loc.path, "%c") then
                return nil, lat(at, i) .. ".path: must not contain control characters"
            end
            local _, _, rerr = ngx_re_find("", loc.path, REGEX_OPTIONS)
            if rerr then
                return nil, lat(at, i) .. ".path: not a regex PCRE compiles: " .. tostring(rerr)
            end
        else
            err = check_path(loc.path, at, ".path", i)
            if err then
                return nil, err
            end
        end
        -- A location that answers by itself (a server-snippet's) has no
        -- backend, only its profile.
        -- Nor does one whose rule answers or names its backends.
        local fixed = (loc.backend == nil or loc.backend == json_null)
            and (type(loc.profile) == "string" or rule ~= nil and gateway.answers(rule))
        if not fixed then
            err = not check.is_name(loc.backend) and check.name(loc.backend, lat(at, i) .. ".backend")
            if err then
                return nil, err
            end
        end
        -- noregex: a prefix that stops the regex search ("location ^~").
        local noregex
        noregex, ferr = flag(loc.noregex, at, ".noregex", i)
        if noregex == nil then
            return nil, ferr
        end
        if noregex and (exact or regex) then
            return nil, lat(at, i) .. ".noregex: only a prefix may have it"
        end
        local preserve
        preserve, ferr = flag(loc.preserve_trailing_slash, at, ".preserve_trailing_slash", i)
        if preserve == nil then
            return nil, ferr
        end
        local guard
        guard, ferr = flag(loc.loop_guard, at, ".loop_guard", i)
        if guard == nil then
            return nil, ferr
        end
        local stored = { path = loc.path, exact = exact or nil, regex = regex or nil,
            backend = (not fixed) and loc.backend or nil, noregex = noregex or nil,
            ssl_redirect = redirect or nil, preserve_trailing_slash = preserve or nil,
            loop_guard = guard or nil, rule = rule }
        if loc.redirect_host ~= nil and loc.redirect_host ~= json_null then
            if not check.is_dns_name(loc.redirect_host) then
                return nil, lat(at, i) .. ".redirect_host: must be a lower-case DNS name"
            end
            stored.redirect_host = loc.redirect_host
        end
        if loc.profile ~= nil and loc.profile ~= json_null then
            if type(loc.profile) ~= "string" or not string_match(loc.profile, PROFILE) then
                return nil, lat(at, i) .. ".profile: must be @restysync_p_ and 32 hex digits"
            end
            stored.profile = loc.profile
        end
        if loc.ingress ~= nil and loc.ingress ~= json_null then
            err = not check.is_name(loc.ingress) and check.name(loc.ingress, lat(at, i) .. ".ingress")
            if err then
                return nil, err
            end
            stored.ingress = loc.ingress
        end
        if loc.auth_file ~= nil and loc.auth_file ~= json_null then
            if type(loc.auth_file) ~= "string" or #loc.auth_file > 320
                or not string_match(loc.auth_file, "^auth/[a-z0-9-]+_[a-z0-9.-]+$")
                or string_find(loc.auth_file, "..", 1, true) then
                return nil, lat(at, i) .. ".auth_file: must be auth/<namespace>_<secret>"
            end
            stored.auth_file = loc.auth_file
        end
        if (stored.ingress or stored.auth_file) and not stored.profile then
            return nil, lat(at, i) .. ": ingress and auth_file need a profile"
        end
        if loc.metric ~= nil and loc.metric ~= json_null then
            -- The request metrics' labels (restysync.requests): namespace,
            -- Ingress, service, path and host, joined by "\1".
            local m = loc.metric
            if type(m) ~= "string" or #m > MAX_METRIC_BYTES or select(2, string_gsub(m, "\1", "")) ~= 4
                or string_find(m, "[%z\2-\31\127]") then
                return nil, lat(at, i) .. ".metric: must be 5 labels joined by \\u0001, without other control characters, "
                    .. "at most " .. MAX_METRIC_BYTES .. " bytes"
            end
            stored.metric = m
        end
        if loc.max_body ~= nil and loc.max_body ~= json_null then
            local n = loc.max_body
            if type(n) ~= "number" or n ~= math_floor(n) or n < 1 or n > MAX_BODY_BYTES then
                return nil, lat(at, i) .. ".max_body: must be a whole number of bytes, at least 1"
            end
            stored.max_body = n
        end
        for t, field in ipairs(TIMEOUTS) do
            local v, terr = seconds(loc[field], at, TIMEOUT_FIELDS[t], i)
            if v == nil then
                return nil, terr
            end
            stored[field] = v or nil
        end
        -- An ordered route may hold a path more than once, with other
        -- matches.
        local key = (exact and "=" or regex and "~" or "") .. loc.path
        if seen[key] and not ordered then
            return nil, string_format("%s: %s %q is also %s[%d]", lat(at, i),
                exact and "exact path" or regex and "regex" or "prefix", loc.path, at, seen[key] - 1)
        end
        seen[key] = i
        parts[i] = json_encode(stored)
    end
    return "[" .. table_concat(parts, ",") .. "]"
end

-- check_update validates a decoded POST /routes body. It returns
-- { upserts = { {name=, locations=<json>}, ... }, removes = { host, ... } }
-- or nil and the reason, naming the field.
local function check_update(body)
    local update, err = check.update(body, ROUTE_FIELDS, function(r, at)
        local name = r.name
        local front, host = string_match(name, "^([^ ]*) (.*)$")
        if front then
            if not is_front(front) then
                return nil, at .. '.name: a front must be an IPv4 address and a port, or an IPv6 address in "[]" and a port'
            end
            name = host
        end
        if type(name) == "string" and string_sub(name, 1, 2) == "*." then
            name = string_sub(name, 3)
        end
        if name ~= DEFAULT and not check.is_dns_name(name) then
            return nil, at .. '.name: must be a lower-case DNS name, "*." and one, or "_", after a front and a space or not'
        end
        local https, herr = flag(r.https, at, ".https")
        if https == nil then
            return nil, herr
        end
        local ordered
        ordered, herr = flag(r.ordered, at, ".ordered")
        if ordered == nil then
            return nil, herr
        end
        if ordered ~= (front ~= nil) then
            return nil, at .. ".ordered: a route is ordered exactly when its name has a front"
        end
        local listener = ""
        if r.listener ~= nil and r.listener ~= json_null and r.listener ~= "" then
            local l = r.listener
            if type(l) == "string" and string_sub(l, 1, 2) == "*." then
                l = string_sub(l, 3)
            end
            if not ordered or not check.is_dns_name(l) then
                return nil, at .. '.listener: must be a lower-case DNS name or "*." and one, in an ordered route'
            end
            listener = ',"listener":' .. json_encode(r.listener)
        end
        local locations, lerr = check_locations(r.locations, at .. ".locations", ordered)
        if not locations then
            return nil, lerr
        end
        return { name = r.name, route = '{"https":' .. tostring(https) .. (ordered and ',"ordered":true' or "")
            .. listener .. ',"locations":' .. locations .. "}" }
    end)
    return update, err
end

-- Storage ----------------------------------------------------------------

-- write stores a checked update. It returns the new version, or nil, the
-- HTTP status and the reason. It must not yield: it runs under the lock.
-- rt:<host> is written before routes_version, the stamp workers cache by.
local function write(d, update)
    local version = store.next_version(d)
    local count = d:get("routes") or 0
    local writes = {}
    for _, host in ipairs(update.removes) do
        if d:get("rt:" .. host) ~= nil then
            count = count - 1
        end
        writes[#writes + 1] = { "rt:" .. host }
    end
    for _, r in ipairs(update.upserts) do
        local key = "rt:" .. r.name
        local old = d:get(key)
        if old == nil then
            count = count + 1
        end
        writes[#writes + 1] = { key, r.route, read = true, old = old }
    end
    writes[#writes + 1] = { "routes", count }
    writes[#writes + 1] = { "routes_version", version, stamp = true }
    writes[#writes + 1] = { "version", version }
    return store.apply(d, writes, version, "routes")
end

-- list is the body of GET /routes: every host with its locations, sorted.
local function list(d)
    local parts = {}
    for _, host in ipairs(store.names(d, "rt:")) do
        local route = d:get("rt:" .. host)
        if route then
            -- route is a JSON object: the name goes in front of its members.
            parts[#parts + 1] = '{"name":' .. json_encode(host) .. "," .. string_sub(route, 2)
        end
    end
    return '{"routes":[' .. table_concat(parts, ",") .. "]}"
end

local function count(d)
    return d:get("routes") or 0
end

-- Serving ----------------------------------------------------------------

-- cache[host] = { exact = { [path] = loc }, prefixes = { loc, ... },
--                 only = loc when "/" is the one location },
-- loc = { path=, len=, backend=, ssl_redirect=, connect_timeout=,
--        send_timeout=, read_timeout=, timeouts = any of the three set },
-- the prefixes longest
-- first; built under cached_version.
local cache = {}
local cached_version

-- build_ordered decodes the locations of an ordered route:
-- { ordered = true, list = { loc, ... }, listener = the listener's
-- hostname or "" } in the order pushed, loc.prefix
-- the element-wise prefix of a prefix path (its trailing "/" dropped),
-- loc.options a regex's, loc.rule built by restysync.gateway.
local function build_ordered(list, listener)
    for i = 1, #list do
        local loc = list[i]
        local rule = loc.rule
        if rule then
            gateway.build_rule(rule)
            if rule.timeout_ms then
                -- The rule's timeouts bound each upstream phase.
                local t = rule.timeout_ms / 1000
                loc.connect_timeout, loc.send_timeout, loc.read_timeout = t, t, t
            end
        end
        loc.timeouts = (loc.connect_timeout or loc.send_timeout or loc.read_timeout) ~= nil
        if loc.regex then
            loc.options = (rule and rule.case_sensitive) and "jo" or REGEX_OPTIONS
            ngx_re_find("", loc.path, loc.options)
        elseif not loc.exact then
            local p = loc.path
            if #p > 1 and string_byte(p, -1) == 47 then -- "/"
                p = string_sub(p, 1, -2)
            end
            loc.prefix, loc.len = p, #p
        end
    end
    return { ordered = true, list = list, listener = listener or "" }
end

-- build decodes the stored locations of one host.
local function build(raw)
    local ok, route = pcall(json.decode, raw)
    if not ok or type(route) ~= "table" or type(route.locations) ~= "table" then
        return nil, "stored route is not a JSON object with locations: " .. tostring(route)
    end
    local list = route.locations
    if route.ordered then
        return build_ordered(list, route.listener)
    end
    local exact, prefixes, regexes = {}, {}, {}
    for i = 1, #list do
        local loc = list[i]
        loc.len = #loc.path
        loc.timeouts = (loc.connect_timeout or loc.send_timeout or loc.read_timeout) ~= nil
        if loc.exact then
            exact[loc.path] = loc
        elseif loc.regex then
            -- Compiled now, into the worker's regex cache, so that a
            -- request's budget pays for matching, never for compiling.
            ngx_re_find("", loc.path, REGEX_OPTIONS)
            regexes[#regexes + 1] = loc
        else
            prefixes[#prefixes + 1] = loc
        end
    end
    table_sort(prefixes, function(a, b) return a.len > b.len end)
    local r = { exact = exact, prefixes = prefixes, regexes = regexes }
    if #list == 1 and prefixes[1] and prefixes[1].path == "/" then
        -- One Prefix "/": every path matches, and match needs no $uri.
        r.only = prefixes[1]
    end
    return r
end

-- find returns the route stored under name, decoded (cached per worker
-- until routes_version moves), or nil (and the reason when what is stored
-- does not decode).
local function find(d, name)
    local version = d:get("routes_version")
    if version ~= cached_version then
        cache = {}
        cached_version = version
    end
    local r = cache[name]
    if r then
        return r
    end
    if version == nil then
        return nil
    end
    local raw = d:get("rt:" .. name)
    if raw == nil then
        return nil
    end
    local err
    r, err = build(raw)
    if not r then
        return nil, err
    end
    cache[name] = r
    return r
end

-- lookup returns the route of host: its own, else that of the wildcard
-- one label up; or nil when there is none (and the reason when what is
-- stored does not decode).
function _M.lookup(d, host)
    local r, err = find(d, host)
    if r or err then
        return r, err
    end
    local dot = string_find(host, ".", 1, true)
    if not dot then
        return nil
    end
    return find(d, "*" .. string_sub(host, dot))
end

-- default returns the route of the default server's locations, or nil.
function _M.default(d)
    return find(d, DEFAULT)
end

-- lookup_front returns the route of host on a Gateway listener's front:
-- its own, else the wildcards over it from the most specific
-- ("*.b.c.d" before "*.c.d": a Gateway wildcard matches any number of
-- labels), else the front's "_"; or nil when there is none (and the
-- reason when what is stored does not decode).
function _M.lookup_front(d, front, host)
    local prefix = front .. " "
    local r, err = find(d, prefix .. host)
    if r or err then
        return r, err
    end
    local dot = string_find(host, ".", 2, true)
    while dot do
        r, err = find(d, prefix .. "*" .. string_sub(host, dot))
        if r or err then
            return r, err
        end
        dot = string_find(host, ".", dot + 1, true)
    end
    return find(d, prefix .. DEFAULT)
end

-- Regex budget -----------------------------------------------------------
--
-- nginx.conf sets lua_regex_match_limit, which bounds one match (PCRE's
-- backtracking steps, JIT included); a host may hold up to
-- --max-regex-paths-per-host regexes. What bounds one request is the
-- budget: the CPU time of the worker's thread while its regexes ran, read
-- every REGEX_CLOCK_EVERY regexes. CPU time, not wall time: a worker
-- descheduled on a busy node (or throttled by its CPU limit) must not fail
-- a request whose regexes are cheap, as it did with a wall clock when the
-- e2e suite ran beside this test. A CPU-time clock is a system call (a
-- fraction of a microsecond), so it is read once per few regexes, and a
-- host without regexes never reads it.
-- Warm, a hundred regexes that do not match take about 30 µs here; the
-- first request of a fresh worker (LuaJIT traces still to compile) about
-- 1.3 ms, hence 5 ms.
local REGEX_BUDGET = 0.005 -- seconds of CPU for the regexes of a request
local REGEX_CLOCK_EVERY = 4
local CLOCK_THREAD_CPUTIME_ID = 3

local clock
do
    local ok = pcall(ffi.cdef, [[
        typedef struct { long tv_sec; long tv_nsec; } restysync_timespec;
        int clock_gettime(int clk_id, restysync_timespec *tp);
    ]])
    local ts = ok and ffi.new("restysync_timespec")
    if ok and ffi.C.clock_gettime(CLOCK_THREAD_CPUTIME_ID, ts) == 0 then
        clock = function()
            ffi.C.clock_gettime(CLOCK_THREAD_CPUTIME_ID, ts)
            return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
        end
    else
        -- Without the clock, nginx's own (milliseconds; ngx.now() alone
        -- would not move during the request).
        clock = function()
            ngx.update_time()
            return ngx.now()
        end
    end
end

-- next_log is when a worker may next log a regex failure: at most one
-- line a second, with how many it left out.
local next_log, unlogged = 0, 0

-- regex_failed counts a regex that could not decide (regex_failures in
-- the restysync_metrics dict, the agent's
-- restysync_lua_regex_failures_total) and logs it, rate-limited. what
-- names it ("route example.com", "canary-by-header-pattern").
local function regex_failed(what, pattern, err)
    local m = restysync.metrics_dict()
    if m then
        m:incr("regex_failures", 1, 0)
    end
    local now = ngx.now()
    if now < next_log then
        unlogged = unlogged + 1
        return
    end
    ngx_log(ngx_ERR, "restysync: ", what, ": regex ", pattern, ": ", err,
        unlogged > 0 and string_format(" (and %d more regex failures in this worker, not logged)", unlogged) or "")
    next_log, unlogged = now + 1, 0
end
_M.regex_failed = regex_failed

-- match returns the location that uri (nginx's normalized $uri) falls in,
-- as nginx would pick it, or nil for none. When a regex fails to run
-- (PCRE's match limit, its JIT stack) or the regexes spend the request's
-- budget, it returns nil and the reason: the request cannot be routed as
-- nginx would, and falling to the longest prefix could skip a regex
-- location's own settings (its auth), so the caller fails it.
function _M.match(r, uri)
    local loc = r.exact[uri]
    if loc then
        return loc
    end
    local longest
    local prefixes = r.prefixes
    for i = 1, #prefixes do
        loc = prefixes[i]
        if string_sub(uri, 1, loc.len) == loc.path then
            longest = loc
            break
        end
    end
    if longest and longest.noregex then
        return longest
    end
    local regexes = r.regexes
    local n = #regexes
    if n == 0 then
        return longest
    end
    local start = n > REGEX_CLOCK_EVERY and clock()
    for i = 1, n do
        loc = regexes[i]
        local from, _, err = ngx_re_find(uri, loc.path, REGEX_OPTIONS)
        if from then
            return loc
        end
        if err then
            return nil, loc.path, err
        end
        if i % REGEX_CLOCK_EVERY == 0 and i < n and clock() - start > REGEX_BUDGET then
            return nil, loc.path, string_format("the request's regex budget (%g ms) is spent after %d of %d regexes",
                REGEX_BUDGET * 1000, i, n)
        end
    end
    return longest
end

-- Ordered routes --------------------------------------------------------

-- The regex budget of the request match_ordered decides, shared with the
-- rule's header and query regexes through budget_find (not re-entrant:
-- match_ordered never yields).
local budget_runs, budget_start

-- budget_find is ngx.re.find under the request's regex budget: it returns
-- where pattern matches subject, or nil; or nil, the pattern and why it
-- could not decide.
local function budget_find(subject, pattern, options)
    local runs = budget_runs + 1
    budget_runs = runs
    if runs % REGEX_CLOCK_EVERY == 0 then
        if not budget_start then
            budget_start = clock()
        elseif clock() - budget_start > REGEX_BUDGET then
            return nil, pattern, string_format("the request's regex budget (%g ms) is spent after %d regexes",
                REGEX_BUDGET * 1000, runs - 1)
        end
    end
    local from, _, err = ngx_re_find(subject, pattern, options)
    if err then
        return nil, pattern, err
    end
    return from
end

-- match_ordered returns the first location of the ordered route r whose
-- path matches uri ($uri) and whose rule's matches hold, or nil for none;
-- or nil, the pattern and the reason when a regex could not decide (the
-- caller fails the request, as match's callers do).
function _M.match_ordered(r, uri)
    budget_runs, budget_start = 0, nil
    local list = r.list
    for i = 1, #list do
        local loc = list[i]
        local ok, pattern, err
        if loc.exact then
            ok = uri == loc.path
        elseif loc.regex then
            ok, pattern, err = budget_find(uri, loc.path, loc.options)
        else
            local n = loc.len
            ok = n == 1 or (string_sub(uri, 1, n) == loc.prefix
                and (#uri == n or string_byte(uri, n + 1) == 47)) -- "/"
        end
        if err then
            return nil, pattern, err
        end
        local rule = loc.rule
        if ok and rule and rule.matches then
            ok, pattern, err = gateway.holds(rule, budget_find)
            if err then
                return nil, pattern, err
            end
        end
        if ok then
            return loc
        end
    end
    return nil
end

_M.check_update = check_update
_M.write = write
_M.list = list
_M.count = count

-- Private functions, reachable by tests.
setmetatable(_M, { __index = {
    build = build,
} })

return _M
