-- restysync.health: passive health of endpoints, shared by every worker.
--
-- Why: a backend that stops answering (a pod killed, a node gone) stays in
-- the EndpointSlice for a while. Each request that meets it costs a failed
-- connection and a retry; after max_fails failures within fail_timeout
-- seconds the endpoint is skipped for fail_timeout seconds, then tried again,
-- as nginx's own max_fails/fail_timeout do for static upstreams.
--
-- The state lives in the restysync_metrics dict, so that every worker sees
-- what the others learned:
--
--   hf:<backend>|<address:port>  failures in the current window (TTL fail_timeout)
--   hd:<backend>|<address:port>  the time until which the endpoint is down (TTL fail_timeout)
--
-- A request reads neither key: each worker keeps a copy of an endpoint's
-- down-until time in the endpoint's table and reads the dict again at most
-- once per REFRESH seconds, or at the next pick after a failure of its own
-- (so that a worker that failed once learns at once that another worker
-- took the endpoint out). Only failures write to the dict.
--
-- Callers never get "no endpoint" from here: when every endpoint is down
-- they still pick one, so that passive health alone never answers 503.

local restysync = require "restysync"

local ngx = ngx
local ngx_now = ngx.now
local ngx_log = ngx.log
local ngx_WARN = ngx.WARN
local tostring = tostring

local _M = { _VERSION = "0.1" }

-- REFRESH is how long a worker trusts its copy of an endpoint's state.
local REFRESH = 1

-- prepare gives a new endpoint table of backend name its dict keys.
-- Endpoints carried over from an earlier build keep theirs (and their
-- cached state): the keys depend only on the backend and the address.
function _M.prepare(ep, name)
    if ep.down_key then
        return
    end
    local id = name .. "|" .. ep.key
    ep.fail_key = "hf:" .. id
    ep.down_key = "hd:" .. id
    ep.down_until = 0
    ep.checked_at = 0
end

-- usable says whether ep may take a request at time now.
function _M.usable(ep, now)
    if now - ep.checked_at >= REFRESH then
        ep.checked_at = now
        local m = restysync.metrics_dict()
        ep.down_until = m and m:get(ep.down_key) or 0
    end
    return now >= ep.down_until
end

-- failed records a failed attempt on ep (a connect error or a timeout)
-- under policy p; the max_fails-th failure within the window takes ep out.
function _M.failed(ep, p)
    local m = restysync.metrics_dict()
    if not m then
        return
    end
    local now = ngx_now()
    local n, err = m:incr(ep.fail_key, 1, 0, p.fail_timeout)
    if not n then
        ngx_log(ngx_WARN, "restysync: counting a failure of ", ep.key, ": ", tostring(err))
        return
    end
    if n >= p.max_fails then
        local down_until = now + p.fail_timeout
        local ok, serr = m:set(ep.down_key, down_until, p.fail_timeout)
        if not ok then
            ngx_log(ngx_WARN, "restysync: marking ", ep.key, " down: ", tostring(serr))
        end
        m:delete(ep.fail_key) -- the next window starts from zero
        ep.down_until, ep.checked_at = down_until, now
        ngx_log(ngx_WARN, "restysync: endpoint ", ep.key, " failed ", n,
            " times; skipped for ", p.fail_timeout, " s")
    else
        ep.checked_at = 0 -- read the dict at the next pick: another worker may have taken it out
    end
end

-- next_usable returns the first usable endpoint of list after position i
-- (wrapping, i itself last) that skip does not hold, else the first one
-- skip does not hold, else nil.
function _M.next_usable(list, i, now, skip)
    local n = #list
    local fallback
    for k = 1, n do
        local ep = list[(i + k - 1) % n + 1]
        if not (skip and skip[ep]) then
            if _M.usable(ep, now) then
                return ep
            end
            fallback = fallback or ep
        end
    end
    return fallback
end

return _M
