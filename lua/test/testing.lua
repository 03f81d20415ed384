-- testing: the harness of the Lua unit tests in this folder, and their
-- assertions.
--
-- Each <module>_test.lua returns a table of test functions for one module
-- of lua/restysync. The Go test agent/internal/apply/luaunit_test.go starts
-- a real nginx with the modules the agent ships and this folder on
-- lua_package_path, and asks run() for each file; every function runs in
-- that nginx's content phase (a shared dict, ngx.re, ngx.md5 are the real
-- ones) and becomes the Go subtest <module>/<function>.
--
-- A test fails by raising an error: the assertions below do, with what they
-- got and wanted.

local cjson = require "cjson"

local _M = {}

local function show(v)
    if type(v) == "string" then
        return string.format("%q", v)
    end
    if type(v) == "table" then
        local ok, s = pcall(cjson.encode, v)
        if ok then
            return s
        end
    end
    return tostring(v)
end

-- same says whether a and b are equal, tables by their keys and values.
local function same(a, b)
    if a == b then
        return true
    end
    if type(a) ~= "table" or type(b) ~= "table" then
        return false
    end
    for k, v in pairs(a) do
        if not same(v, b[k]) then
            return false
        end
    end
    for k in pairs(b) do
        if a[k] == nil then
            return false
        end
    end
    return true
end

-- eq fails unless got equals want; tables are compared key by key.
function _M.eq(got, want, what)
    if not same(got, want) then
        error(string.format("%s: got %s, want %s", what or "value", show(got), show(want)), 2)
    end
end

-- ok fails unless v is truthy.
function _M.ok(v, what)
    if not v then
        error((what or "value") .. ": got " .. show(v) .. ", want a true value", 2)
    end
end

-- contains fails unless s is a string that holds part.
function _M.contains(s, part, what)
    if type(s) ~= "string" or not string.find(s, part, 1, true) then
        error(string.format("%s: got %s, want it to contain %q", what or "value", show(s), part), 2)
    end
end

-- fresh_dict empties the shared dict restysync (and its metrics dict) and
-- returns it: a test that writes starts from nothing.
function _M.fresh_dict()
    local d = ngx.shared.restysync
    d:flush_all()
    d:flush_expired()
    ngx.shared.restysync_metrics:flush_all()
    return d
end

-- run loads the test file name ("chash_test") and calls each of its test
-- functions, in the order of their names. It returns a JSON object:
-- {"tests":[{"name":..., "error": null | "..."}, ...]}, or {"error": "..."}
-- when the file does not load.
function _M.run(name)
    if type(name) ~= "string" or not string.match(name, "^[a-z]+_test$") then
        return cjson.encode({ error = "not a test file name: " .. tostring(name) })
    end
    local path, serr = package.searchpath(name, package.path)
    if not path then
        return cjson.encode({ error = serr })
    end
    local chunk, lerr = loadfile(path)
    if not chunk then
        return cjson.encode({ error = lerr })
    end
    local ok, tests = pcall(chunk)
    if not ok or type(tests) ~= "table" then
        return cjson.encode({ error = "loading " .. path .. ": " .. tostring(tests) })
    end
    local names = {}
    for fn_name, fn in pairs(tests) do
        if type(fn) == "function" then
            names[#names + 1] = fn_name
        end
    end
    table.sort(names)
    if #names == 0 then
        return cjson.encode({ error = path .. " holds no test functions" })
    end
    local results = {}
    for i, fn_name in ipairs(names) do
        local passed, err = xpcall(tests[fn_name], debug.traceback)
        results[i] = { name = fn_name, error = (not passed) and tostring(err) or nil }
    end
    return cjson.encode({ tests = results })
end

return _M
