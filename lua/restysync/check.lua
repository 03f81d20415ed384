-- restysync.check: shape checks for the JSON bodies of the config API.
--
-- cjson decodes JSON into plain tables, where an array and an object look
-- alike; these helpers tell them apart so that the API can name the field
-- that is wrong.

local pairs = pairs
local type = type
local string_format = string.format

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

return _M
