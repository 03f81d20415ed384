-- restysync.canary: whether a request goes to a backend's canary.
--
-- The policy of the primary backend names the canary backend and how to
-- choose (model.Policy in Go): a request header first, then a cookie, then
-- a weight. The header or cookie says "always" or "never" (or, for the
-- header, the configured value, or a value the configured PCRE pattern
-- matches, means "always"); anything else falls through to the next rule,
-- as in ingress-nginx.

local routes = require "restysync.routes"

local ngx = ngx
local ngx_var = ngx.var
local re_find = ngx.re.find
local math_random = math.random
local string_gsub = string.gsub
local string_lower = string.lower

local _M = { _VERSION = "0.1" }

-- header_var turns a header name into the nginx variable that holds it.
local function header_var(name)
    return "http_" .. string_gsub(string_lower(name), "-", "_")
end

-- choose returns true when this request goes to the canary of p.
function _M.choose(p)
    if p.canary_header then
        local value = ngx_var[header_var(p.canary_header)]
        if value then
            if p.canary_header_value then
                if value == p.canary_header_value then
                    return true
                end
            elseif p.canary_header_pattern then
                -- PCRE, compiled once per worker ("o"). A pattern that
                -- fails to run (lua_regex_match_limit) is counted and
                -- logged as a route's regex is, and the header does not
                -- decide: the cookie and the weight do. One pattern per
                -- request, bounded by the match limit.
                local from, _, err = re_find(value, p.canary_header_pattern, "jo")
                if from then
                    return true
                elseif err then
                    routes.regex_failed("canary-by-header-pattern", p.canary_header_pattern, err)
                end
            elseif value == "always" then
                return true
            elseif value == "never" then
                return false
            end
        end
    end
    if p.canary_cookie then
        local value = ngx_var["cookie_" .. p.canary_cookie]
        if value == "always" then
            return true
        elseif value == "never" then
            return false
        end
    end
    local weight = p.canary_weight
    if weight <= 0 then
        return false
    end
    return math_random(p.canary_weight_total) <= weight
end

return _M
