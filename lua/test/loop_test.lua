-- Unit tests of restysync.loop: the loop guard's tokens.
local t = require "testing"
local loop = require "restysync.loop"

local T = {}

local MINE = string.rep("a", 32)
local OTHER = string.rep("b", 32)

-- with runs f with the request's X-Restysync-Proxied set to v (nil: none)
-- and this instance's token MINE, then puts both back.
local function with(v, f)
    local saved = loop.via():match("(%x+)$")
    loop.set_token(MINE)
    ngx.req.set_header("X-Restysync-Proxied", v)
    local ok, err = pcall(f)
    ngx.req.clear_header("X-Restysync-Proxied")
    loop.set_token(saved)
    if not ok then
        error(err, 0)
    end
end

function T.test_set_token_wants_32_hex_digits()
    t.eq(pcall(loop.set_token, "xyz"), false, "a short token")
    t.eq(pcall(loop.set_token, string.rep("g", 32)), false, "not hex")
end

function T.test_via_appends_this_instance()
    with(nil, function()
        t.eq(loop.via(), MINE, "via of a client's request")
    end)
    with(OTHER, function()
        t.eq(loop.via(), OTHER .. " " .. MINE, "via after another instance")
    end)
    with("junk " .. OTHER:upper(), function()
        t.eq(loop.via(), OTHER .. " " .. MINE, "via skips what is no token, lower-cases")
    end)
end

-- via keeps the last MAX_HOPS-1 tokens: the value stays bounded.
function T.test_via_is_bounded()
    local many = {}
    for i = 1, 10 do
        many[i] = string.format("%032x", i)
    end
    with(table.concat(many, " "), function()
        local n = 0
        for _ in loop.via():gmatch("%x+") do
            n = n + 1
        end
        t.eq(n, loop.MAX_HOPS, "tokens in via")
    end)
end

-- refuse lets through a request that did not come round (a refusal would
-- end this request: the data-plane tests cover it).
function T.test_refuse_lets_other_requests_through()
    with(nil, function()
        t.eq(loop.refuse("a.test"), nil, "a client's request")
    end)
    with(OTHER, function()
        t.eq(loop.refuse("a.test"), nil, "one hop through another instance")
    end)
end

return T
