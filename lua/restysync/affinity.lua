-- restysync.affinity: sticky sessions by cookie.
--
-- Why: applications that keep session state in memory need each client to
-- come back to the endpoint that holds its session. The balancer pins a
-- client with a cookie naming its endpoint; a request whose cookie names a
-- current, usable endpoint goes there, any other is balanced as usual and
-- gets the cookie for the endpoint it was given.
--
-- The cookie value is the first 16 hex digits of the MD5 of the endpoint's
-- address:port: it does not show the address, it is the same in every
-- worker and every nginx replica, and it stays valid across endpoint pushes
-- for the endpoints that remain. An endpoint that is gone (or that
-- restysync.health has taken out) re-pins the client; with
-- cookie_change_on_failure, so does one that failed on this request.

local ngx = ngx
local ngx_var = ngx.var
local ngx_header = ngx.header
local ngx_md5 = ngx.md5
local ngx_time = ngx.time
local ngx_http_time = ngx.http_time
local string_sub = string.sub

local _M = { _VERSION = "0.1" }

-- id returns the cookie value of ep (cached in its table).
local function id(ep)
    local v = ep.cookie_id
    if not v then
        v = string_sub(ngx_md5(ep.key), 1, 16)
        ep.cookie_id = v
    end
    return v
end

-- prepare sets up entry for policy p (affinity "cookie"): the endpoints by
-- cookie value, the nginx variable that holds the cookie, and the cookie's
-- attributes, so that a request only concatenates.
function _M.prepare(entry, p)
    local by_id = {}
    local list = entry.endpoints
    for i = 1, #list do
        by_id[id(list[i])] = list[i]
    end
    entry.by_cookie = by_id
    entry.cookie_var = "cookie_" .. p.cookie_name
    local attrs = "; Path=" .. (p.cookie_path or "/")
    if p.cookie_max_age and p.cookie_max_age > 0 then
        attrs = attrs .. "; Max-Age=" .. p.cookie_max_age
    end
    if p.cookie_domain then
        attrs = attrs .. "; Domain=" .. p.cookie_domain
    end
    if p.cookie_samesite then
        attrs = attrs .. "; SameSite=" .. p.cookie_samesite
    end
    if p.cookie_secure then
        attrs = attrs .. "; Secure"
    end
    entry.cookie_expires = p.cookie_expires -- added per pin: a date
    entry.cookie_prefix = p.cookie_name .. "="
    entry.cookie_suffix = attrs .. "; HttpOnly"
end

-- pinned returns the endpoint the request's cookie names, if entry holds it.
function _M.pinned(entry)
    local v = ngx_var[entry.cookie_var]
    if v then
        return entry.by_cookie[v]
    end
    return nil
end

-- pin sets the cookie that pins the client to ep. It works until the
-- response headers are sent: in the access and balancer phases.
function _M.pin(entry, ep)
    local cookie = entry.cookie_prefix .. id(ep) .. entry.cookie_suffix
    local expires = entry.cookie_expires
    if expires and expires > 0 then
        cookie = cookie .. "; Expires=" .. ngx_http_time(ngx_time() + expires)
    end
    ngx_header["Set-Cookie"] = cookie
end

return _M
