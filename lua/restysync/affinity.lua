-- restysync.affinity: sticky sessions by cookie.
--
-- Why: applications that keep session state in memory need each client to
-- come back to the endpoint that holds its session. The balancer pins a
-- client with a cookie; a request whose cookie leads to a current, usable
-- endpoint goes there, any other is balanced as usual and gets the cookie
-- for the endpoint it was given.
--
-- The cookie value is PIN.TAG. TAG is the first 8 hex digits of the MD5 of
-- the backend's name without its canary part (what follows "+"), so that
-- a canary split can tell whom the client was pinned to: the backend or
-- its canary. PIN depends on the mode (affinity-mode):
--
--   balanced    (the default) 8 hex digits, a position on the backend's
--               hash ring (restysync.chash) inside an arc its endpoint
--               owns. When endpoints are added, the positions of about
--               1/(n+1) of the clients fall to the new ones, which then
--               serve them: sessions are rebalanced as the backend scales.
--   persistent  the first 16 hex digits of the MD5 of the endpoint's
--               address:port: the client stays on it while it lives.
--
-- Neither shows the address; both are the same in every worker and every
-- nginx replica, and stay valid across endpoint pushes. A pin whose TAG is
-- another backend's, or whose endpoint is gone (or taken out by
-- restysync.health), re-pins the client; with cookie_change_on_failure, so
-- does an endpoint that failed on this request. A persistent pin without
-- TAG (set before tags existed) is still honoured.
--
-- With cookie_conditional_samesite_none, SameSite=None is left out for
-- clients that would refuse the cookie or treat it as Strict
-- (samesite_none_compatible, the User-Agent list ingress-nginx checks).

local chash = require "restysync.chash"

local ngx = ngx
local ngx_var = ngx.var
local ngx_header = ngx.header
local ngx_md5 = ngx.md5
local ngx_time = ngx.time
local ngx_http_time = ngx.http_time
local tonumber = tonumber
local string_sub = string.sub
local string_find = string.find
local string_match = string.match
local string_format = string.format

local _M = { _VERSION = "0.1" }

-- id returns the persistent pin of ep (cached in its table).
local function id(ep)
    local v = ep.cookie_id
    if not v then
        v = string_sub(ngx_md5(ep.key), 1, 16)
        ep.cookie_id = v
    end
    return v
end

-- tag returns the TAG of the backend name: the MD5 of the name up to its
-- canary part, which a split variant ("b@ns/ing+ns/canary") adds to the
-- name of the backend it splits.
local function tag(name)
    return string_sub(ngx_md5(string_match(name, "^[^+]*")), 1, 8)
end

-- samesite_none_compatible says whether the client of User-Agent ua takes
-- a cookie with SameSite=None as meant. Not: Chrome 40 to 69 (51 to 66
-- refuse it; ingress-nginx leaves it out for the whole range, where the
-- attribute changes nothing), every browser of iOS 12 (iPhone, iPad), and
-- Safari on macOS 10.14, which treat it as Strict. An absent User-Agent is
-- taken as compatible.
local function samesite_none_compatible(ua)
    if not ua or ua == "" then
        return true
    end
    local chrome = tonumber(string_match(ua, "Chrome/(%d+)"))
    if chrome and chrome >= 40 and chrome <= 69 then
        return false
    end
    if string_find(ua, "CPU iPhone OS 12%f[^%d]") or string_find(ua, "iPad; CPU OS 12%f[^%d]") then
        return false
    end
    if string_find(ua, "Macintosh", 1, true) and string_find(ua, "Intel Mac OS X 10_14%f[^%d]")
        and string_find(ua, "Safari", 1, true) and not string_find(ua, "Chrome", 1, true) then
        return false
    end
    return true
end

-- prepare sets up entry for policy p (affinity "cookie"): the endpoints by
-- persistent pin, or the hash ring for balanced pins (entry.ring, built by
-- the balancer when the algorithm has none), the nginx variable that holds
-- the cookie, and the cookie's attributes, so that a request only
-- concatenates.
function _M.prepare(entry, p)
    local list = entry.endpoints
    entry.cookie_persistent = p.affinity_mode == "persistent"
    if entry.cookie_persistent then
        local by_id = {}
        for i = 1, #list do
            by_id[id(list[i])] = list[i]
        end
        entry.by_cookie = by_id
    elseif not entry.ring then
        entry.ring = chash.build(list)
    end
    entry.cookie_tag = tag(entry.name)
    entry.cookie_var = "cookie_" .. p.cookie_name
    local attrs = "; Path=" .. (p.cookie_path or "/")
    if p.cookie_max_age and p.cookie_max_age > 0 then
        attrs = attrs .. "; Max-Age=" .. p.cookie_max_age
    end
    if p.cookie_domain then
        attrs = attrs .. "; Domain=" .. p.cookie_domain
    end
    local secure = p.cookie_secure and "; Secure" or ""
    if p.cookie_samesite then
        if p.cookie_samesite == "None" and p.cookie_conditional_samesite_none then
            entry.cookie_suffix_plain = attrs .. secure .. "; HttpOnly"
        end
        attrs = attrs .. "; SameSite=" .. p.cookie_samesite
    end
    entry.cookie_expires = p.cookie_expires -- added per pin: a date
    entry.cookie_prefix = p.cookie_name .. "="
    entry.cookie_suffix = attrs .. secure .. "; HttpOnly"
end

-- parse splits the cookie value v into its pin and tag (nil without one),
-- or returns nil when v is no pin.
local function parse(v)
    local pin, t = string_match(v, "^(%x+)%.(%x%x%x%x%x%x%x%x)$")
    if pin then
        return pin, t
    end
    return string_match(v, "^(%x+)$"), nil
end

-- pinned returns the endpoint the request's cookie pins it to, if entry
-- holds it.
function _M.pinned(entry)
    local v = ngx_var[entry.cookie_var]
    if not v then
        return nil
    end
    local pin, t = parse(v)
    if not pin or (t and t ~= entry.cookie_tag) then
        return nil
    end
    if entry.cookie_persistent then
        return entry.by_cookie[pin]
    end
    if not t or #pin ~= 8 then
        return nil
    end
    return chash.owner(entry.ring, tonumber(pin, 16))
end

-- pinned_to returns which of primary and canary (both with cookie
-- affinity, under one cookie name) the request's cookie pins it to, or nil:
-- a canary split sends such a client there before asking its rules.
function _M.pinned_to(primary, canary)
    local v = ngx_var[primary.cookie_var]
    if not v then
        return nil
    end
    local _, t = parse(v)
    if t == primary.cookie_tag then
        return primary
    elseif t and canary.affinity and t == canary.cookie_tag and canary.cookie_var == primary.cookie_var then
        return canary
    end
    return nil
end

-- pin sets the cookie that pins the client to ep. It works until the
-- response headers are sent: in the access and balancer phases.
function _M.pin(entry, ep)
    local pin
    if entry.cookie_persistent then
        pin = id(ep)
    else
        local pos = chash.position(entry.ring, ep)
        if not pos then
            return -- ep is not on the ring (cannot happen): no cookie
        end
        pin = string_format("%08x", pos)
    end
    local suffix = entry.cookie_suffix
    if entry.cookie_suffix_plain and not samesite_none_compatible(ngx_var.http_user_agent) then
        suffix = entry.cookie_suffix_plain
    end
    local cookie = entry.cookie_prefix .. pin .. "." .. entry.cookie_tag .. suffix
    local expires = entry.cookie_expires
    if expires and expires > 0 then
        cookie = cookie .. "; Expires=" .. ngx_http_time(ngx_time() + expires)
    end
    ngx_header["Set-Cookie"] = cookie
end

-- Private functions, reachable by tests.
_M.samesite_none_compatible = samesite_none_compatible
_M.tag = tag
_M.parse = parse

return _M
