-- restysync.fileaccess: which of the files the agent writes for nginx the
-- workers cannot use.
--
-- The agent asks (POST /access, restysync.api) after nginx (re)starts and
-- whenever those files change, and names each failure in its log and in
-- /readyz: a worker that cannot read an htpasswd file fails every request
-- of its Ingress with 500, and nothing else would say why. The answer holds
-- for every worker: they run as one user.

local check = require "restysync.check"

local ngx = ngx
local io_open = io.open
local os_remove = os.remove
local ipairs = ipairs
local type = type
local tostring = tostring
local string_find = string.find
local string_format = string.format
local string_gmatch = string.gmatch
local string_match = string.match
local string_sub = string.sub

local _M = { _VERSION = "0.1" }

-- MAX_PATHS bounds one POST /access.
local MAX_PATHS = 10000
local REQUEST_FIELDS = { read = true, write = true }

-- check_paths returns the list at body[field] if it holds only relative
-- paths under the prefix ("auth/ns_name", "tmp/client_body"), or nil and
-- the reason.
local function check_paths(body, field)
    local paths = body[field]
    if paths == nil then
        return {}
    end
    local n = check.array_length(paths)
    if not n then
        return nil, field .. ": must be an array"
    end
    if n > MAX_PATHS then
        return nil, string_format("%s: more than %d paths", field, MAX_PATHS)
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

-- check_request validates a decoded POST /access body, {"read": [paths],
-- "write": [folders]}. It returns the two lists, or nil, nil and the
-- reason.
function _M.check_request(body)
    local field = check.unknown_field(body, REQUEST_FIELDS)
    if field then
        return nil, nil, "body: unknown field " .. field
    end
    local read, rerr = check_paths(body, "read")
    if not read then
        return nil, nil, rerr
    end
    local write, werr = check_paths(body, "write")
    if not write then
        return nil, nil, werr
    end
    return read, write
end

-- denied returns, for the checked lists, each path under nginx's prefix
-- that this worker cannot read (read) or cannot create a file in (write):
-- { path = <absolute>, access = "read" | "write", error = <why> }.
function _M.denied(read, write)
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
    return denied
end

return _M
