-- restysync.certs: TLS certificates served by SNI, with no reload.
--
-- The agent pushes certificates over the config API (POST /certificates,
-- see restysync.api); they live in the shared dict:
--
--   c:<name>      the PEM chain, a NUL byte, the PEM key
--   cm:<name>     `"hosts":[...],"hash":"<hex>"`, a JSON object's members,
--                 for GET /certificates and for moving hosts
--   cv:<name>     the version at which that certificate last changed
--   h:<host>      the name of the certificate of host ("a.example.com",
--                 or a one-label wildcard "*.example.com")
--   certificates  how many certificates there are
--
-- serve() runs in ssl_certificate_by_lua for every handshake. It looks the
-- SNI name up as an exact host, then as the wildcard one label up; a client
-- without SNI, or with a host no certificate names, keeps the default
-- certificate from nginx.conf.
--
-- A Gateway listener's server calls serve_front(front) instead: its
-- certificates' hosts are the front, a space and a name (the agent's
-- model.FrontKey): the SNI name exact, then the wildcards over it from the
-- most specific (a Gateway wildcard matches any number of labels), then
-- the front's "*"; else nginx.conf's. The Ingress hosts are never looked
-- at there, nor the fronts' by serve(). Each worker caches the parsed certificate and
-- key by name and rebuilds them only when cv:<name> moved, so c: is always
-- written before cv:.

local cjson = require "cjson"
local ngx_ssl = require "ngx.ssl"
local check = require "restysync.check"
local store = require "restysync.store"
local restysync = require "restysync"

local ngx = ngx
local ngx_log = ngx.log
local ngx_ERR = ngx.ERR
local ngx_sha1_bin = ngx.sha1_bin
local server_name = ngx_ssl.server_name
local clear_certs = ngx_ssl.clear_certs
local set_cert = ngx_ssl.set_cert
local set_priv_key = ngx_ssl.set_priv_key
local parse_pem_cert = ngx_ssl.parse_pem_cert
local parse_pem_priv_key = ngx_ssl.parse_pem_priv_key
local ipairs = ipairs
local pairs = pairs
local pcall = pcall
local type = type
local tostring = tostring
local tonumber = tonumber
local math_floor = math.floor
local string_byte = string.byte
local string_find = string.find
local string_format = string.format
local string_gsub = string.gsub
local string_lower = string.lower
local string_match = string.match
local string_sub = string.sub
local table_concat = table.concat
local table_sort = table.sort

local _M = { _VERSION = "0.1" }

-- Limits of one certificate; a Kubernetes Secret holds at most 1 MiB.
local MAX_PEM_BYTES = 1024 * 1024
local MAX_HOSTS = 10000
local MAX_HOST_BYTES = 253

local json = cjson.new()
json.decode_max_depth(16)
local json_null = json.null
local json_encode = json.encode

local array_length = check.array_length

-- Validation -------------------------------------------------------------

-- DEFAULT_HOST is the host of the default certificate
-- (--default-ssl-certificate): served without SNI and for names no other
-- certificate covers.
local DEFAULT_HOST = "*"

-- is_host accepts a lower-case DNS name, "*." and one, or DEFAULT_HOST,
-- after a Gateway listener's front and a space or not.
local function is_host(h)
    if type(h) == "string" then
        local front, host = string_match(h, "^([^ ]*) (.*)$")
        if front then
            if not check.is_front(front) then
                return false
            end
            h = host
        end
    end
    if h == DEFAULT_HOST then
        return true
    end
    if type(h) == "string" and string_sub(h, 1, 2) == "*." then
        return check.is_dns_name(string_sub(h, 3))
    end
    return check.is_dns_name(h)
end

local function to_hex(data)
    return (data:gsub(".", function(c)
        return string_format("%02x", string_byte(c))
    end))
end

-- hash is what GET /certificates reports and the agent compares with:
-- the hex SHA-1 of the chain, a newline and the key.
local function hash(cert, key)
    return to_hex(ngx_sha1_bin(cert .. "\n" .. key))
end

-- check_pem returns why pem (at path) is not a usable PEM string, or nil.
-- parse parses it; OpenSSL reads PEM, so anything it takes is stored.
local function check_pem(pem, path, parse)
    if type(pem) ~= "string" then
        return path .. ": must be a string"
    end
    if pem == "" then
        return path .. ": must not be empty"
    end
    if #pem > MAX_PEM_BYTES then
        return string_format("%s: is %d bytes long, longer than %d", path, #pem, MAX_PEM_BYTES)
    end
    if string_find(pem, "\0", 1, true) then
        return path .. ": must not contain a NUL byte"
    end
    local parsed, err = parse(pem)
    if not parsed then
        return path .. ": does not parse: " .. tostring(err)
    end
    return nil
end

local CERT_FIELDS = { name = true, hosts = true, cert = true, key = true }

-- check_hosts validates the hosts of one certificate and returns them, or
-- nil and the reason. owners maps each host of the update to where it is.
local function check_hosts(hosts, path, owners)
    if hosts == nil then
        return nil, path .. ": is missing"
    end
    if hosts == json_null then
        return {}
    end
    local n = array_length(hosts)
    if not n then
        return nil, path .. ": must be an array"
    end
    if n > MAX_HOSTS then
        return nil, string_format("%s: has %d hosts, more than %d", path, n, MAX_HOSTS)
    end
    local out = {}
    for i = 1, n do
        local host = hosts[i]
        local at = string_format("%s[%d]", path, i - 1)
        if not is_host(host) then
            return nil, at .. ": must be a lower-case DNS name, a wildcard \"*.\" and one, or \"*\" for the default"
        end
        if owners[host] then
            return nil, at .. ': "' .. host .. '" is also ' .. owners[host]
        end
        owners[host] = at
        out[i] = host
    end
    table_sort(out)
    return out
end

-- check_update validates a decoded POST /certificates body. It returns
-- { upserts = { {name=, hosts=, cert=, key=}, ... }, removes = { name, ... } }
-- or nil and the reason, naming the field.
local function check_update(body)
    local owners = {} -- host -> where it appeared first
    return check.update(body, CERT_FIELDS, function(c, at)
        local hosts, err = check_hosts(c.hosts, at .. ".hosts", owners)
        if not hosts then
            return nil, err
        end
        err = check_pem(c.cert, at .. ".cert", parse_pem_cert)
            or check_pem(c.key, at .. ".key", parse_pem_priv_key)
        if err then
            return nil, err
        end
        return { name = c.name, hosts = hosts, cert = c.cert, key = c.key }
    end)
end

-- Storage ----------------------------------------------------------------

-- stored_hosts returns the hosts stored for name, or nil if name is not stored.
local function stored_hosts(d, name)
    local meta = d:get("cm:" .. name)
    if not meta then
        return nil
    end
    local ok, m = pcall(json.decode, "{" .. meta .. "}")
    if not ok or type(m) ~= "table" or type(m.hosts) ~= "table" then
        return {}
    end
    return m.hosts
end

local function meta_of(c)
    local hosts = "[]"
    if #c.hosts > 0 then
        -- Hosts passed is_host: no character needs escaping.
        hosts = '["' .. table_concat(c.hosts, '","') .. '"]'
    end
    return '"hosts":' .. hosts .. ',"hash":"' .. hash(c.cert, c.key) .. '"'
end

-- write stores a checked update. It returns the new version, or nil, the
-- HTTP status and the reason. A host that another certificate holds, and
-- that certificate is not part of the update, is a conflict (409): the
-- agent moves a host by sending both certificates. It must not yield: it
-- runs under the lock.
local function write(d, update)
    local touched = {}
    local wanted = {} -- host -> name after this update
    for _, c in ipairs(update.upserts) do
        touched[c.name] = true
        for _, host in ipairs(c.hosts) do
            wanted[host] = c.name
        end
    end
    for _, name in ipairs(update.removes) do
        touched[name] = true
    end
    for i, c in ipairs(update.upserts) do
        for _, host in ipairs(c.hosts) do
            local owner = d:get("h:" .. host)
            if owner and owner ~= c.name and not touched[owner] then
                return nil, 409, string_format('upserts[%d].hosts: "%s" belongs to certificate "%s", which this update leaves as it is',
                    i - 1, host, owner)
            end
        end
    end

    local version = store.next_version(d)
    local count = d:get("certificates") or 0
    local writes = {}
    -- unmap deletes the h: keys of name's stored hosts that no certificate
    -- of the update takes; it returns whether name was stored.
    local function unmap(name)
        local old = stored_hosts(d, name)
        if not old then
            return false
        end
        for _, host in ipairs(old) do
            if type(host) == "string" and wanted[host] == nil and d:get("h:" .. host) == name then
                writes[#writes + 1] = { "h:" .. host }
            end
        end
        return true
    end
    for _, name in ipairs(update.removes) do
        if unmap(name) then
            count = count - 1
        end
        writes[#writes + 1] = { "cv:" .. name, stamp = true }
        writes[#writes + 1] = { "cm:" .. name }
        writes[#writes + 1] = { "c:" .. name }
    end
    for _, c in ipairs(update.upserts) do
        if not unmap(c.name) then
            count = count + 1
        end
        writes[#writes + 1] = { "c:" .. c.name, c.cert .. "\0" .. c.key }
        writes[#writes + 1] = { "cm:" .. c.name, meta_of(c) }
        writes[#writes + 1] = { "cv:" .. c.name, version, stamp = true }
    end
    for host, name in pairs(wanted) do
        if d:get("h:" .. host) ~= name then
            writes[#writes + 1] = { "h:" .. host, name }
        end
    end
    writes[#writes + 1] = { "certificates", count }
    writes[#writes + 1] = { "version", version }
    return store.apply(d, writes, version, "certificates")
end

-- list returns the body of GET /certificates: every certificate's name,
-- hosts and hash, sorted by name. Keys are never listed.
local function list(d)
    local parts = {}
    for _, name in ipairs(store.names(d, "cm:")) do
        local meta = d:get("cm:" .. name)
        if meta then
            parts[#parts + 1] = '{"name":' .. json_encode(name) .. "," .. meta .. "}"
        end
    end
    return '{"certificates":[' .. table_concat(parts, ",") .. "]}"
end

-- count returns how many certificates the dict holds.
local function count(d)
    return d:get("certificates") or 0
end

-- Serving ----------------------------------------------------------------

-- cache[name] = { version = v, cert = <parsed chain>, key = <parsed key> }
local cache = {}
-- swept is the dict version at which cache was last checked for stale entries.
local swept

-- sweep drops cached certificates that changed or went away, once per
-- dict version, so that removed certificates do not stay parsed forever.
local function sweep(d)
    local version = d:get("version")
    if version == swept then
        return
    end
    swept = version
    for name, entry in pairs(cache) do
        if d:get("cv:" .. name) ~= entry.version then
            cache[name] = nil
        end
    end
end

-- lookup returns the name of the certificate for sni, or nil.
local function lookup(d, sni)
    local name = d:get("h:" .. sni)
    if name then
        return name
    end
    local dot = string_find(sni, ".", 1, true)
    if dot and dot > 1 then
        name = d:get("h:*" .. string_sub(sni, dot))
        if name then
            return name
        end
    end
    return d:get("h:" .. DEFAULT_HOST)
end

-- load returns the parsed certificate name, from the cache unless its
-- version moved, or nil and why.
local function load(d, name)
    local version = d:get("cv:" .. name)
    if version == nil then
        cache[name] = nil
        return nil, "is not stored"
    end
    local entry = cache[name]
    if entry and entry.version == version then
        return entry
    end
    cache[name] = nil
    local raw = d:get("c:" .. name)
    if type(raw) ~= "string" then
        return nil, "is not stored"
    end
    local sep = string_find(raw, "\0", 1, true)
    if not sep then
        return nil, "is stored without a key"
    end
    local cert, err = parse_pem_cert(string_sub(raw, 1, sep - 1))
    if not cert then
        return nil, "certificate does not parse: " .. tostring(err)
    end
    local key
    key, err = parse_pem_priv_key(string_sub(raw, sep + 1))
    if not key then
        return nil, "key does not parse: " .. tostring(err)
    end
    entry = { version = version, cert = cert, key = key }
    cache[name] = entry
    return entry
end

-- lookup_front returns the name of the certificate for sni on front, or nil.
local function lookup_front(d, front, sni)
    local prefix = "h:" .. front .. " "
    local name = d:get(prefix .. sni)
    if name then
        return name
    end
    local dot = string_find(sni, ".", 2, true)
    while dot do
        name = d:get(prefix .. "*" .. string_sub(sni, dot))
        if name then
            return name
        end
        dot = string_find(sni, ".", dot + 1, true)
    end
    return d:get(prefix .. DEFAULT_HOST)
end

-- serve_sni sets the certificate for this handshake: by SNI among the
-- Ingress hosts' (front nil) or front's.
local function serve_sni(front)
    local sni = server_name()
    local d = restysync.dict()
    sweep(d)
    local name
    if not sni or #sni > MAX_HOST_BYTES then
        -- No SNI (or not a host name): the default certificate.
        sni = "(no SNI)"
        name = d:get("h:" .. (front and front .. " " or "") .. DEFAULT_HOST)
    elseif front then
        sni = string_lower(sni)
        name = lookup_front(d, front, sni)
    else
        sni = string_lower(sni)
        name = lookup(d, sni)
    end
    if not name then
        return
    end
    local entry, err = load(d, name)
    if not entry then
        ngx_log(ngx_ERR, "restysync: certificate ", name, " for ", sni, " ", err, "; serving the default one")
        return
    end
    local ok
    ok, err = clear_certs()
    if not ok then
        ngx_log(ngx_ERR, "restysync: clearing the default certificate: ", err)
        return
    end
    ok, err = set_cert(entry.cert)
    if ok then
        ok, err = set_priv_key(entry.key)
    end
    if not ok then
        -- The default certificate is gone: this handshake fails.
        ngx_log(ngx_ERR, "restysync: setting certificate ", name, " for ", sni, ": ", err)
    end
end

-- serve picks the certificate for this handshake; call it from
-- ssl_certificate_by_lua_block. It never raises: on any error the client
-- gets the default certificate, and the error is logged.
function _M.serve()
    local ok, err = pcall(serve_sni)
    if not ok then
        ngx_log(ngx_ERR, "restysync: choosing a certificate: ", err)
    end
end

-- serve_front is serve for a Gateway listener's server, whose front
-- render writes into the call.
function _M.serve_front(front)
    local ok, err = pcall(serve_sni, front)
    if not ok then
        ngx_log(ngx_ERR, "restysync: choosing a certificate on ", tostring(front), ": ", err)
    end
end

_M.check_update = check_update
_M.write = write
_M.list = list
_M.count = count

-- Private functions, reachable by tests.
setmetatable(_M, { __index = {
    cache = cache,
    is_host = is_host,
    hash = hash,
} })

return _M
