-- restysync.check: shape checks for the JSON bodies of the config API.
--
-- cjson decodes JSON into plain tables, where an array and an object look
-- alike; these helpers tell them apart so that the API can name the field
-- that is wrong.

local json_null = require("cjson").null -- one lightuserdata for every cjson instance

local pairs = pairs
local tostring = tostring
local type = type
local string_format = string.format
local string_gmatch = string.gmatch
local string_match = string.match

local _M = { _VERSION = "0.1" }

-- MAX_NAME_BYTES bounds a backend or certificate name.
_M.MAX_NAME_BYTES = 512

-- array_length returns the length of v if it is a JSON array (a table whose
-- keys are exactly 1..n), or nil. An empty table counts as an empty array:
-- cjson decodes {} and [] alike.
function _M.array_length(v)
    if type(v) ~= "table" then
        return nil
    end
    local n = 0
    for k in pairs(v) do
        if type(k) ~= "number" then
            return nil
        end
        n = n + 1
    end
    for i = 1, n do
        if v[i] == nil then
            return nil
        end
    end
    return n
end

-- is_object reports whether v is a JSON object (a table with string keys).
function _M.is_object(v)
    if type(v) ~= "table" then
        return false
    end
    for k in pairs(v) do
        if type(k) ~= "string" then
            return false
        end
    end
    return true
end

-- unknown_field returns the first key of obj not in allowed, or nil.
function _M.unknown_field(obj, allowed)
    for k in pairs(obj) do
        if not allowed[k] then
            return k
        end
    end
    return nil
end

-- is_name says whether name is a usable name (name returns nil), without
-- building the message: the check of a large push asks it first.
function _M.is_name(name)
    return type(name) == "string" and name ~= "" and #name <= _M.MAX_NAME_BYTES
end

-- name returns why name (found at path) is not a usable name, or nil.
function _M.name(name, path)
    if type(name) ~= "string" then
        return path .. ": must be a string"
    end
    if name == "" then
        return path .. ": must not be empty"
    end
    if #name > _M.MAX_NAME_BYTES then
        return string_format("%s: is %d bytes long, longer than %d", path, #name, _M.MAX_NAME_BYTES)
    end
    return nil
end

-- MAX_HOST_BYTES bounds a DNS name.
_M.MAX_HOST_BYTES = 253

-- is_dns_name accepts a lower-case DNS name: labels of 1..63 letters,
-- digits and inner hyphens, at most MAX_HOST_BYTES in all.
function _M.is_dns_name(h)
    if type(h) ~= "string" or #h == 0 or #h > _M.MAX_HOST_BYTES then
        return false
    end
    for label in string_gmatch(h .. ".", "([^.]*)%.") do
        if #label == 0 or #label > 63 then
            return false
        end
        if not string_match(label, "^[a-z0-9]$") and not string_match(label, "^[a-z0-9][a-z0-9%-]*[a-z0-9]$") then
            return false
        end
    end
    return true
end

-- MAX_FRONT_BYTES bounds a front: an IPv6 address in brackets and a port.
local MAX_FRONT_BYTES = 64

-- is_front accepts a Gateway listener's front, the prefix of its routes'
-- and certificates' names: an IPv4 address and a port, or an IPv6
-- address in brackets and a port (the agent's model.FrontName).
function _M.is_front(front)
    return type(front) == "string" and #front <= MAX_FRONT_BYTES
        and (string_match(front, "^%d+%.%d+%.%d+%.%d+:%d+$") ~= nil
            or string_match(front, "^%[[%x:%.]+%]:%d+$") ~= nil)
end

local UPDATE_FIELDS = { upserts = true, removes = true }

-- update validates the envelope every POST body shares:
--   { "upserts": [ {"name": ..., <fields>}, ... ], "removes": [ name, ... ] }
-- Each upsert is an object with only the keys in item_fields and a usable
-- name; no name appears twice in the body. check_item(item, at) checks the
-- rest of one upsert and returns what to store, or nil and the reason. It
-- returns { upserts = {...}, removes = {...} }, or nil and the reason,
-- naming the field.
function _M.update(body, item_fields, check_item)
    if not _M.is_object(body) then
        return nil, "body: must be a JSON object"
    end
    local extra = _M.unknown_field(body, UPDATE_FIELDS)
    if extra then
        return nil, tostring(extra) .. ": unknown field"
    end

    local seen = {} -- name -> where it appeared first
    -- claim names the field at fault at .. suffix, built only on a fault.
    local function claim(name, at, suffix)
        if not _M.is_name(name) then
            return _M.name(name, at .. suffix)
        end
        if seen[name] then
            return at .. suffix .. ': "' .. name .. '" is also ' .. seen[name]
        end
        seen[name] = at
        return nil
    end

    local update = { upserts = {}, removes = {} }
    local upserts = body.upserts
    if upserts ~= nil and upserts ~= json_null then
        local n = _M.array_length(upserts)
        if not n then
            return nil, "upserts: must be an array"
        end
        for i = 1, n do
            local item = upserts[i]
            local at = string_format("upserts[%d]", i - 1)
            if not _M.is_object(item) then
                return nil, at .. ": must be an object"
            end
            local field = _M.unknown_field(item, item_fields)
            if field then
                return nil, at .. "." .. tostring(field) .. ": unknown field"
            end
            local err = claim(item.name, at, ".name")
            if err then
                return nil, err
            end
            local checked, ierr = check_item(item, at)
            if not checked then
                return nil, ierr
            end
            update.upserts[i] = checked
        end
    end

    local removes = body.removes
    if removes ~= nil and removes ~= json_null then
        local n = _M.array_length(removes)
        if not n then
            return nil, "removes: must be an array"
        end
        for i = 1, n do
            local at = string_format("removes[%d]", i - 1)
            local err = claim(removes[i], at, "")
            if err then
                return nil, err
            end
            update.removes[i] = removes[i]
        end
    end
    return update
end

return _M
