-- Unit tests of restysync.fileaccess: POST /access's checks and answer.
local t = require "testing"
local fileaccess = require "restysync.fileaccess"

local T = {}

function T.test_check_request_names_the_field()
    local cases = {
        { { bogus = {} }, "body: unknown field bogus" },
        { { read = "auth/x" }, "read: must be an array" },
        { { read = { "/etc/passwd" } }, "read[0]: must be a relative path of letters, digits and ._-/" },
        { { read = { "auth/../../etc" } }, "read[0]: must not hold . or .. parts" },
        { { write = { "tmp//x" } }, "write[0]: must be a relative path" },
        { { write = { "tmp/" } }, "write[0]: must be a relative path" },
        { { write = { "" } }, "write[0]: must be a path of 1 to 1024 bytes" },
        { { read = { "ok", 3 } }, "read[1]: must be a path of 1 to 1024 bytes" },
    }
    for _, c in ipairs(cases) do
        local read, write, err = fileaccess.check_request(c[1])
        t.eq(read, nil, "read")
        t.eq(write, nil, "write")
        t.contains(err, c[2], "reason")
    end
    local read, write = fileaccess.check_request({ read = { "auth/ns_secret" } })
    t.eq(read, { "auth/ns_secret" }, "read")
    t.eq(write, {}, "write")
end

function T.test_denied_names_what_the_worker_cannot_use()
    local prefix = ngx.config.prefix()
    if prefix:sub(-1) ~= "/" then
        prefix = prefix .. "/"
    end
    local denied = fileaccess.denied({ "nginx.conf", "missing.file" }, { "missing-dir" })
    t.eq(#denied, 2, "denied")
    t.eq(denied[1].path, prefix .. "missing.file", "first path")
    t.eq(denied[1].access, "read", "first access")
    t.eq(denied[2].path, prefix .. "missing-dir", "second path")
    t.eq(denied[2].access, "write", "second access")
    t.contains(denied[2].error, "No such file", "second error")
end

return T
