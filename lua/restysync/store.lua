-- restysync.store: all-or-nothing writes to the shared dict.
--
-- A writer holds a lock key while it writes, so that two POSTs handled by
-- two workers cannot interleave their keys or reuse a version number.
-- apply() writes a list of keys in order; when one does not fit, it puts
-- back every value it replaced and reports why.

local ngx = ngx
local ngx_sleep = ngx.sleep
local ngx_now = ngx.now
local math_min = math.min
local tostring = tostring
local string_format = string.format
local string_sub = string.sub
local table_sort = table.sort

local _M = { _VERSION = "0.1" }

local LOCK_KEY = "lock"
local LOCK_TTL = 10 -- seconds; frees the lock if a worker dies holding it
local LOCK_WAIT = 5 -- seconds a writer waits for another one to finish

-- lock takes the update lock, waiting up to LOCK_WAIT for another writer.
-- It returns true, or nil and the reason.
function _M.lock(d)
    local deadline = ngx_now() + LOCK_WAIT
    local delay = 0.001
    while true do
        local ok, err = d:safe_add(LOCK_KEY, true, LOCK_TTL)
        if ok then
            return true
        end
        if err ~= "exists" then
            return nil, "taking the update lock: " .. tostring(err)
        end
        if ngx_now() >= deadline then
            return nil, "another update is still in progress"
        end
        ngx_sleep(delay)
        delay = math_min(delay * 2, 0.05)
    end
end

function _M.unlock(d)
    d:delete(LOCK_KEY)
end

-- names returns the names under prefix ("b:", "rt:", ...) of the keys d
-- holds, the prefix cut off, sorted: what the GET handlers list.
function _M.names(d, prefix)
    local names, n = {}, #prefix
    local keys = d:get_keys(0)
    for i = 1, #keys do
        local key = keys[i]
        if string_sub(key, 1, n) == prefix then
            names[#names + 1] = string_sub(key, n + 1)
        end
    end
    table_sort(names)
    return names
end

-- next_version is the version number the next accepted update gets.
function _M.next_version(d)
    return (d:get("version") or 0) + 1
end

-- restore puts back the values saved before a failed write: other keys
-- first, stamps (the per-item version keys workers cache by) last, so that
-- no worker caches new content under an old stamp. It returns nil and a
-- reason if a value did not fit back.
local function restore(d, saved, n)
    local failed
    for pass = 1, 2 do
        for i = n, 1, -1 do
            local entry = saved[i]
            if (entry.stamp == true) == (pass == 2) then
                local ok, err
                if entry.old == nil then
                    ok, err = d:delete(entry[1])
                else
                    ok, err = d:safe_set(entry[1], entry.old)
                end
                if not ok then
                    failed = failed or (entry[1] .. ": " .. tostring(err))
                end
            end
        end
    end
    if failed then
        return nil, failed
    end
    return true
end

-- apply performs writes, a list of { key, value, stamp = bool } (a nil
-- value deletes the key), in order. It returns version, or nil, the HTTP
-- status and the reason. what names the stored items in messages
-- ("backends"). It must not yield: it runs under the lock.
--
-- Each write keeps the value it replaced (w.old) for the undo; a caller
-- that has read it already, under the same lock, says so with
-- read = true and old = the value (nil: there was none), which saves a
-- second read per key on a large push.
function _M.apply(d, writes, version, what)
    for i = 1, #writes do
        local w = writes[i]
        local key, value = w[1], w[2]
        if not w.read then
            w.old = d:get(key)
        end
        local ok, err
        if value == nil then
            ok, err = d:delete(key)
        else
            ok, err = d:safe_set(key, value)
        end
        if not ok then
            local reason = string_format("storing %s: %s", key, tostring(err))
            local status = err == "no memory" and 507 or 500
            local restored, rerr = restore(d, writes, i)
            -- Burn the version number even though nothing changed: a worker
            -- may have cached content stamped with it before the undo.
            d:safe_set("version", version)
            if not restored then
                return nil, 500, reason .. "; undoing the update failed too (" .. rerr
                    .. "): the stored " .. what .. " are now partly updated, push them all again"
            end
            return nil, status, reason .. "; nothing was changed"
        end
    end
    return version
end

return _M
