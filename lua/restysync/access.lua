-- restysync.access: the response headers a location's access settings
-- add: CORS (annotation enable-cors and the cors-* family), and the cookies
-- an external auth service set (auth-url, auth-always-set-cookie).
--
-- The location decides in its rewrite phase (nginx "if"s the agent
-- renders) whether the request's origin is allowed and sets the values in
-- variables: $restysync_cors is "1" for an allowed origin, "1o" for its
-- preflight (answered 204 there), "" otherwise. cors() runs as the
-- location's header filter and copies them into the response, replacing
-- whatever the backend sent. Headers go through ngx.header rather than
-- add_header, which in a location would drop the http block's headers.

local ngx = ngx
local ngx_var = ngx.var
local ngx_header = ngx.header

local type = type
local string_find = string.find
local string_sub = string.sub
local table_concat = table.concat

local _M = { _VERSION = "0.1" }

-- add_vary_origin adds Origin to the Vary header, keeping the backend's.
local function add_vary_origin()
    local vary = ngx_header["Vary"]
    if type(vary) == "table" then
        vary = table_concat(vary, ", ")
    end
    if not vary or vary == "" then
        ngx_header["Vary"] = "Origin"
    elseif not string_find(vary, "Origin", 1, true) then
        ngx_header["Vary"] = vary .. ", Origin"
    end
end

-- add_vary_origin is restysync.gateway's too (its CORS filter).
_M.add_vary_origin = add_vary_origin

-- cors sets the Access-Control-* headers when the origin is allowed.
function _M.cors()
    local flag = ngx_var.restysync_cors
    if flag ~= "1" and flag ~= "1o" then
        return
    end
    local origin = ngx_var.restysync_cors_origin
    if not origin or origin == "" then
        origin = ngx_var.http_origin
        if not origin or origin == "" then
            return
        end
        -- The answer depends on the request's Origin: caches must know.
        add_vary_origin()
    end
    ngx_header["Access-Control-Allow-Origin"] = origin
    if ngx_var.restysync_cors_credentials == "true" then
        ngx_header["Access-Control-Allow-Credentials"] = "true"
    end
    ngx_header["Access-Control-Allow-Methods"] = ngx_var.restysync_cors_methods
    ngx_header["Access-Control-Allow-Headers"] = ngx_var.restysync_cors_headers
    local expose = ngx_var.restysync_cors_expose
    if expose and expose ~= "" then
        ngx_header["Access-Control-Expose-Headers"] = expose
    end
    ngx_header["Access-Control-Max-Age"] = ngx_var.restysync_cors_max_age
    if flag == "1o" then
        ngx_header["Content-Type"] = "text/plain; charset=utf-8"
        ngx_header["Content-Length"] = "0"
    end
end

-- add_header's statuses: the auth cookie goes with these unless always.
local cookie_statuses = {
    [200] = true, [201] = true, [204] = true, [206] = true, [301] = true,
    [302] = true, [303] = true, [304] = true, [307] = true, [308] = true,
}

-- The separator of the auth service's cookies in $restysync_auth_cookies:
-- a header value never holds a line feed.
local COOKIE_SEPARATOR = "\n"

-- keep_auth_cookies runs as the header filter of the auth location, in
-- the auth subrequest, and keeps every Set-Cookie of the auth service's
-- answer (a table when it sent several) in $restysync_auth_cookies.
-- nginx's subrequest shares the parent request's variables, so the parent
-- reads them in auth_cookie; $upstream_http_set_cookie would give only
-- the first cookie (nginx before 1.23) or all of them joined with ", "
-- into one malformed cookie (1.23 and later).
function _M.keep_auth_cookies()
    local cookies = ngx_header["Set-Cookie"]
    if type(cookies) == "table" then
        cookies = table_concat(cookies, COOKIE_SEPARATOR)
    end
    ngx_var.restysync_auth_cookies = cookies or ""
end

-- add_header's statuses: the auth cookies go with these unless always.
local cookie_statuses = {
    [200] = true, [201] = true, [204] = true, [206] = true, [301] = true,
    [302] = true, [303] = true, [304] = true, [307] = true, [308] = true,
}

-- auth_cookie adds the Set-Cookie headers of the auth service's answer
-- (kept by keep_auth_cookies) to the response, each as its own header,
-- after the backend's own cookies; with always, whatever the status.
function _M.auth_cookie(always)
    local kept = ngx_var.restysync_auth_cookies
    if not kept or kept == "" then
        return
    end
    if not always and not cookie_statuses[ngx.status] then
        return
    end
    local cookies = ngx_header["Set-Cookie"]
    if cookies == nil then
        cookies = {}
    elseif type(cookies) ~= "table" then
        cookies = { cookies }
    end
    local from = 1
    while true do
        local to = string_find(kept, COOKIE_SEPARATOR, from, true)
        cookies[#cookies + 1] = string_sub(kept, from, (to or 0) - 1)
        if not to then
            break
        end
        from = to + 1
    end
    ngx_header["Set-Cookie"] = cookies
end

return _M
