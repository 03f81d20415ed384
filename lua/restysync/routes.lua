-- restysync.routes: the hosts that have no server block in nginx.conf.
--
-- A host whose paths need nothing but the balancer is routed here instead
-- of by nginx (see the agent's model.RoutedInLua), so that a new Ingress is
-- a push, not a reload. The agent pushes each host's locations in nginx's
-- terms (POST /routes, see restysync.api); they live in the shared dict:
--
--   rt:<host>       the route, compact JSON: {"https":bool,"locations":
--                   [{"path","exact","backend","ssl_redirect",
--                     "connect_timeout","send_timeout","read_timeout"}, ...]}
--   routes          how many hosts there are
--   routes_version  the version at which any route last changed
--
-- The default server's "location /" calls restysync.balancer.route(), which
-- looks the request's host up here and matches its path as nginx matches
-- locations: an exact location first, then the longest prefix. A host
-- without "https" is not routed for HTTPS requests (the default server
-- answers them, as for a server block without TLS); a location with
-- "ssl_redirect" answers plain HTTP with a 308 to HTTPS; a location's
-- timeouts (seconds) are set on the request by the balancer. Each worker
-- keeps the hosts it has served decoded, and drops them all when
-- routes_version moves: routes change with the structure, seldom.

local cjson = require "cjson"
local check = require "restysync.check"
local store = require "restysync.store"

local ipairs = ipairs
local pcall = pcall
local type = type
local tostring = tostring
local math_floor = math.floor
local string_byte = string.byte
local string_find = string.find
local string_format = string.format
local string_sub = string.sub
local table_concat = table.concat
local table_sort = table.sort

local _M = { _VERSION = "0.1" }

-- Limits of one route.
local MAX_LOCATIONS = 10000
local MAX_PATH_BYTES = 4096
local MAX_TIMEOUT_SECONDS = 24 * 3600

local json = cjson.new()
json.decode_max_depth(16)
local json_null = json.null
local json_encode = json.encode

local array_length = check.array_length
local is_object = check.is_object
local unknown_field = check.unknown_field

-- Validation -------------------------------------------------------------

-- check_path returns why path (at at) is not a location path, or nil: it
-- starts with "/", holds no control character or space, and is bounded.
local function check_path(path, at)
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

local ROUTE_FIELDS = { name = true, https = true, locations = true }
local LOCATION_FIELDS = { path = true, exact = true, backend = true, ssl_redirect = true,
    connect_timeout = true, send_timeout = true, read_timeout = true }
local TIMEOUTS = { "connect_timeout", "send_timeout", "read_timeout" }

-- flag returns the boolean v (false when absent or null), or nil and the
-- reason, naming at.
local function flag(v, at)
    if v == nil or v == json_null then
        return false
    end
    if type(v) ~= "boolean" then
        return nil, at .. ": must be true or false"
    end
    return v
end

-- seconds returns the timeout v in whole seconds (false when absent or
-- null), or nil and the reason, naming at.
local function seconds(v, at)
    if v == nil or v == json_null then
        return false
    end
    if type(v) ~= "number" or v ~= math_floor(v) or v < 1 or v > MAX_TIMEOUT_SECONDS then
        return nil, string_format("%s: must be a whole number of seconds from 1 to %d", at, MAX_TIMEOUT_SECONDS)
    end
    return v
end

-- check_locations validates the locations of one route and returns them
-- as the JSON stored in rt:<host>, or nil and the reason.
local function check_locations(locations, at)
    local n = array_length(locations)
    if not n then
        return nil, at .. ": must be an array"
    end
    if n == 0 then
        return nil, at .. ": must not be empty"
    end
    if n > MAX_LOCATIONS then
        return nil, string_format("%s: has %d locations, more than %d", at, n, MAX_LOCATIONS)
    end
    local seen, parts = {}, {}
    for i = 1, n do
        local loc = locations[i]
        local lat = string_format("%s[%d]", at, i - 1)
        if not is_object(loc) then
            return nil, lat .. ": must be an object"
        end
        local field = unknown_field(loc, LOCATION_FIELDS)
        if field then
            return nil, lat .. "." .. tostring(field) .. ": unknown field"
        end
        local err = check_path(loc.path, lat .. ".path")
        if err then
            return nil, err
        end
        local exact, ferr = flag(loc.exact, lat .. ".exact")
        if exact == nil then
            return nil, ferr
        end
        local redirect
        redirect, ferr = flag(loc.ssl_redirect, lat .. ".ssl_redirect")
        if redirect == nil then
            return nil, ferr
        end
        err = check.name(loc.backend, lat .. ".backend")
        if err then
            return nil, err
        end
        local stored = { path = loc.path, exact = exact or nil, backend = loc.backend, ssl_redirect = redirect or nil }
        for _, field in ipairs(TIMEOUTS) do
            local v, terr = seconds(loc[field], lat .. "." .. field)
            if v == nil then
                return nil, terr
            end
            stored[field] = v or nil
        end
        local key = (exact and "=" or "") .. loc.path
        if seen[key] then
            return nil, string_format("%s: %s %q is also %s", lat, exact and "exact path" or "prefix", loc.path, seen[key])
        end
        seen[key] = lat
        parts[i] = json_encode(stored)
    end
    return "[" .. table_concat(parts, ",") .. "]"
end

-- check_update validates a decoded POST /routes body. It returns
-- { upserts = { {name=, locations=<json>}, ... }, removes = { host, ... } }
-- or nil and the reason, naming the field.
local function check_update(body)
    local update, err = check.update(body, ROUTE_FIELDS, function(r, at)
        if not check.is_dns_name(r.name) then
            return nil, at .. ".name: must be a lower-case DNS name"
        end
        local https, herr = flag(r.https, at .. ".https")
        if https == nil then
            return nil, herr
        end
        local locations, lerr = check_locations(r.locations, at .. ".locations")
        if not locations then
            return nil, lerr
        end
        return { name = r.name, route = '{"https":' .. tostring(https) .. ',"locations":' .. locations .. "}" }
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
        if d:get("rt:" .. r.name) == nil then
            count = count + 1
        end
        writes[#writes + 1] = { "rt:" .. r.name, r.route }
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

-- cache[host] = { https = bool, exact = { [path] = loc }, prefixes = { loc, ... },
--                 only = loc when "/" is the one location },
-- loc = { path=, len=, backend=, ssl_redirect=, connect_timeout=,
--        send_timeout=, read_timeout=, timeouts = any of the three set },
-- the prefixes longest
-- first; built under cached_version.
local cache = {}
local cached_version

-- build decodes the stored locations of one host.
local function build(raw)
    local ok, route = pcall(json.decode, raw)
    if not ok or type(route) ~= "table" or type(route.locations) ~= "table" then
        return nil, "stored route is not a JSON object with locations: " .. tostring(route)
    end
    local list = route.locations
    local exact, prefixes = {}, {}
    for i = 1, #list do
        local loc = list[i]
        loc.len = #loc.path
        loc.timeouts = (loc.connect_timeout or loc.send_timeout or loc.read_timeout) ~= nil
        if loc.exact then
            exact[loc.path] = loc
        else
            prefixes[#prefixes + 1] = loc
        end
    end
    table_sort(prefixes, function(a, b) return a.len > b.len end)
    local r = { https = route.https == true, exact = exact, prefixes = prefixes }
    if #list == 1 and prefixes[1] and prefixes[1].path == "/" then
        -- One Prefix "/": every path matches, and match needs no $uri.
        r.only = prefixes[1]
    end
    return r
end

-- lookup returns the routes of host, or nil when Lua does not route it
-- (or what it holds for it does not decode: then the reason too).
function _M.lookup(d, host)
    local version = d:get("routes_version")
    if version ~= cached_version then
        cache = {}
        cached_version = version
    end
    local r = cache[host]
    if r then
        return r
    end
    if version == nil then
        return nil
    end
    local raw = d:get("rt:" .. host)
    if raw == nil then
        return nil
    end
    local err
    r, err = build(raw)
    if not r then
        return nil, err
    end
    cache[host] = r
    return r
end

-- match returns the location that uri (nginx's normalized $uri) falls in,
-- as nginx would pick it, or nil for none.
function _M.match(r, uri)
    local loc = r.exact[uri]
    if loc then
        return loc
    end
    local prefixes = r.prefixes
    for i = 1, #prefixes do
        loc = prefixes[i]
        if string_sub(uri, 1, loc.len) == loc.path then
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
