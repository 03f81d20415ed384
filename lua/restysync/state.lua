-- restysync.state: the last good state, loaded by the master at a cold
-- start so that nginx serves it on its first request.
--
-- The agent writes what Lua holds (certificates, backends, routes) to
-- nginx's prefix, the shared dir, after each push that changed it (the
-- agent's apply/statefile.go; temp files + rename, mode 0600, like the
-- config API's secret: the certificates carry their keys). The manifest,
-- restysync.state (apply.StateName), is JSON: {"config_hash": the config
-- it was pushed for, "profiles": that config's profiles,
-- "certificates"|"backends"|"routes": {"chunks": [file, ...]}}, where each
-- file is in the folder restysync.state.d (apply.StateChunks), named by a
-- hash of its content, and holds a JSON list of upserts; a kind's upserts
-- are those of its chunks, together the body of the POST that would push
-- it all. The agent writes the changed chunks first and the manifest last,
-- so a manifest names chunks that exist. A section may also hold its
-- upserts itself, {"upserts":[...]}, as the agent's single file did before
-- the chunks. A manifest, or any chunk it names, that does not read or
-- decode (missing, cut short, not a list, a name that is not a chunk's)
-- refuses the whole state: nothing is stored.
--
-- restysync.init calls load() in the master (init_by_lua) on a cold start
-- only: a HUP keeps the shared dict, whose state is newer than the file.
-- Each kind goes through its module's own checks and all-or-nothing write,
-- as a POST would. A route that jumps to a profile, or has a share that
-- jumps to a Gateway backend TLS location, the starting nginx.conf does
-- not have is left out (nginx would answer 500 for its missing named
-- location, the router close the connection; left out, the host answers
-- 404 until the agent pushes): the profiles and Gateway locations of the
-- starting config are rendered into init_by_lua, the same bytes nginx
-- loads, so they cannot disagree with it.
--
-- Nothing here may fail nginx's start: a missing file is a first start, and
-- a file that does not read, decode or check is logged and left out; nginx
-- starts empty, as it did before the file existed, and the agent pushes.

local cjson = require "cjson"
local backends = require "restysync.backends"
local certs = require "restysync.certs"
local routes = require "restysync.routes"
local check = require "restysync.check"

local ngx = ngx
local io_open = io.open
local ipairs = ipairs
local pcall = pcall
local type = type
local tostring = tostring
local string_sub = string.sub
local string_find = string.find
local string_match = string.match

local _M = { _VERSION = "0.1" }

-- NAME is the manifest in nginx's prefix; apply.StateName in Go.
local NAME = "restysync.state"
_M.NAME = NAME

-- CHUNKS is the folder of the chunk files, beside NAME; apply.StateChunks.
local CHUNKS = "restysync.state.d"

-- MAX_BYTES bounds what is read, the manifest and its chunks together:
-- the config API takes bodies up to 64 MB, and the three kinds together
-- stay below this.
local MAX_BYTES = 256 * 1024 * 1024

local json = cjson.new()
json.decode_invalid_numbers(false)
json.decode_max_depth(16)

-- path returns where the manifest is: nginx's prefix and NAME.
function _M.path()
    local prefix = ngx.config.prefix()
    if string_sub(prefix, -1) ~= "/" then
        prefix = prefix .. "/"
    end
    return prefix .. NAME
end

-- chunk_dir returns the folder of the chunks of the manifest at path:
-- CHUNKS beside it.
local function chunk_dir(path)
    return (string_match(path, "^(.*/)") or "") .. CHUNKS .. "/"
end

-- read_file returns the content of path, of at most budget.left bytes
-- (taken from it), or nil and why not.
local function read_file(path, budget)
    local f, err = io_open(path, "rb")
    if not f then
        return nil, err
    end
    local raw = f:read(budget.left + 1) or ""
    f:close()
    if #raw > budget.left then
        return nil, "the state is larger than " .. MAX_BYTES .. " bytes"
    end
    budget.left = budget.left - #raw
    return raw
end

-- read_chunks returns the upserts of the chunk files names (a list of
-- their names) in dir, in one list, or nil and why not.
local function read_chunks(names, dir, budget)
    local n = check.array_length(names)
    if not n then
        return nil, "chunks is not a list"
    end
    local upserts = {}
    for i = 1, n do
        local name = names[i]
        if type(name) ~= "string" or not string_find(name, "^[0-9a-f]+$") or #name ~= 32 then
            return nil, "chunks[" .. (i - 1) .. "] is not a chunk's name"
        end
        if not dir then
            return nil, "chunk " .. name .. ": no folder of chunks to read it from"
        end
        local raw, err = read_file(dir .. name, budget)
        if not raw then
            return nil, "chunk " .. name .. ": " .. tostring(err)
        end
        if not string_find(raw, "^%s*%[") then
            return nil, "chunk " .. name .. " is not a JSON list"
        end
        local ok, items = pcall(json.decode, raw)
        if not ok then
            return nil, "chunk " .. name .. " is not valid JSON (a write cut short?): " .. tostring(items)
        end
        local m = check.array_length(items)
        if not m then
            return nil, "chunk " .. name .. " is not a JSON list"
        end
        for j = 1, m do
            upserts[#upserts + 1] = items[j]
        end
    end
    return upserts
end

-- read_sections replaces each section of state that names chunks with the
-- upserts they hold, read from dir; a section that holds its upserts
-- itself is left as it is. It returns nil and why when any chunk does not
-- read: the state is refused whole.
local function read_sections(state, dir, budget)
    for _, kind in ipairs({ "certificates", "backends", "routes" }) do
        local section = state[kind]
        if check.is_object(section) and section.chunks ~= nil then
            if section.upserts ~= nil or section.removes ~= nil then
                return nil, kind .. ": both chunks and upserts"
            end
            local upserts, err = read_chunks(section.chunks, dir, budget)
            if not upserts then
                return nil, kind .. ": " .. err
            end
            state[kind] = { upserts = upserts }
        end
    end
    return true
end

-- has_locations says whether every named location loc jumps to (its
-- profile, its rule's backend TLS locations) is in names (a set).
local function has_locations(loc, names)
    if type(loc) ~= "table" then
        return true -- the routes module's check refuses it
    end
    if type(loc.profile) == "string" and not names[loc.profile] then
        return false
    end
    local rule = loc.rule
    if type(rule) == "table" and type(rule.backends) == "table" then
        for _, b in ipairs(rule.backends) do
            if type(b) == "table" and type(b.tls) == "string" and not names[b.tls] then
                return false
            end
        end
    end
    return true
end

-- usable_routes returns the route upserts of section whose every location
-- jumps only to named locations in names (a set: the profiles and Gateway
-- locations), and how many were left out.
local function usable_routes(upserts, names)
    local kept, dropped = {}, 0
    for _, r in ipairs(upserts) do
        local ok = type(r) == "table"
        if ok and type(r.locations) == "table" then
            for _, loc in ipairs(r.locations) do
                if not has_locations(loc, names) then
                    ok = false
                    break
                end
            end
        end
        if ok then
            kept[#kept + 1] = r
        else
            dropped = dropped + 1
        end
    end
    return kept, dropped
end

-- put checks one kind's section with mod.check_update and writes it with
-- mod.write. It returns how many it stored, or nil and why not.
local function put(d, mod, section, what)
    if section == nil then
        return 0
    end
    local cok, update, err = pcall(mod.check_update, section)
    if not cok then
        return nil, what .. ": " .. tostring(update)
    end
    if not update then
        return nil, what .. ": " .. tostring(err)
    end
    local wok, version, _, reason = pcall(mod.write, d, update)
    if not wok then
        return nil, what .. ": " .. tostring(version)
    end
    if not version then
        return nil, what .. ": " .. tostring(reason)
    end
    return #update.upserts
end

-- restore stores the state the manifest raw holds in d, its chunks read
-- from the folder dir (nil: a manifest that names chunks is refused), for
-- a config of hash whose named locations routes jump to (profiles, Gateway
-- locations) are the list profile_names. budget bounds the bytes of the
-- chunks read ({left = n}; nil: MAX_BYTES). It returns a summary table
-- {certificates=, backends=, routes=, dropped_routes=, config_hash=}, or
-- nil and why nothing or not all was stored. A chunk that does not read
-- refuses the whole state. Certificates and backends are stored before
-- the routes that name them; a kind that does not check is left out, the
-- others stored.
function _M.restore(d, raw, hash, profile_names, dir, budget)
    if type(raw) ~= "string" or raw == "" then
        return nil, "is empty"
    end
    -- cjson decodes [] as an empty table, like {}: only an object is a state.
    if not string_find(raw, "^%s*{") then
        return nil, "is not a JSON object"
    end
    local ok, state = pcall(json.decode, raw)
    if not ok then
        return nil, "is not valid JSON (a write cut short?): " .. tostring(state)
    end
    if not check.is_object(state) then
        return nil, "is not a JSON object"
    end
    local rok, rerr = read_sections(state, dir, budget or { left = MAX_BYTES })
    if not rok then
        return nil, rerr
    end
    local profiles = {}
    for _, name in ipairs(profile_names or {}) do
        profiles[name] = true
    end
    local summary = { config_hash = state.config_hash, certificates = 0, backends = 0, routes = 0, dropped_routes = 0 }
    local failed
    local n, err = put(d, certs, state.certificates, "certificates")
    if n then
        summary.certificates = n
    else
        failed = err
    end
    n, err = put(d, backends, state.backends, "backends")
    if n then
        summary.backends = n
    else
        failed = failed or err
    end
    local section = state.routes
    if check.is_object(section) and type(section.upserts) == "table" then
        local kept, dropped = usable_routes(section.upserts, profiles)
        summary.dropped_routes = dropped
        section = { upserts = kept }
    end
    n, err = put(d, routes, section, "routes")
    if n then
        summary.routes = n
    else
        failed = failed or err
    end
    if failed then
        return nil, failed, summary
    end
    return summary
end

-- load reads the file (at path; nil: _M.path()) and restores it (restore)
-- for the starting config of hash with profile_names, logging what it did.
-- It never raises. It returns whether anything was stored.
function _M.load(d, hash, profile_names, path)
    path = path or _M.path()
    local f, oerr = io_open(path, "rb")
    if not f then
        ngx.log(ngx.NOTICE, "restysync: no saved state to start with (", oerr, "): serving nothing until the agent pushes")
        return false
    end
    local raw = f:read(MAX_BYTES + 1)
    f:close()
    if raw and #raw > MAX_BYTES then
        ngx.log(ngx.ERR, "restysync: ", path, " is larger than ", MAX_BYTES, " bytes: ignored, serving nothing until the agent pushes")
        return false
    end
    local budget = { left = MAX_BYTES - #(raw or "") }
    local ok, summary, err, partial = pcall(_M.restore, d, raw, hash, profile_names, chunk_dir(path), budget)
    if not ok then
        ngx.log(ngx.ERR, "restysync: loading ", path, ": ", tostring(summary), ": ignored, serving nothing until the agent pushes")
        return false
    end
    if not summary then
        if not partial then
            ngx.log(ngx.ERR, "restysync: ", path, " ", err, ": ignored, serving nothing until the agent pushes")
            return false
        end
        ngx.log(ngx.ERR, "restysync: ", path, " ", err, ": that part is left out until the agent pushes")
        summary = partial
        if not summary or summary.certificates + summary.backends + summary.routes == 0 then
            return false
        end
    end
    if summary.dropped_routes > 0 then
        ngx.log(ngx.WARN, "restysync: saved state: ", summary.dropped_routes, " route(s) jump to a profile or location this nginx.conf ",
            "does not have (saved for config ", tostring(summary.config_hash), "): left out until the agent pushes")
    end
    ngx.log(ngx.NOTICE, "restysync: serving the saved state: ", summary.certificates, " certificate(s), ",
        summary.backends, " backend(s), ", summary.routes, " route(s)")
    return true
end

return _M
