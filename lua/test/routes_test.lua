-- Unit tests of restysync.routes: the route table's checks, its writes and
-- the path matcher.
local t = require "testing"
local cjson = require "cjson"
local routes = require "restysync.routes"

local T = {}

-- route builds the decoded route of locations as routes.build would.
local function route(locations)
    local r, err = routes.build(cjson.encode({ https = false, locations = locations }))
    t.ok(r, "build: " .. tostring(err))
    return r
end

local function path_of(loc)
    return loc and ((loc.exact and "=" or loc.regex and "~" or "") .. loc.path) or nil
end

-- The matcher picks as nginx picks locations: exact, then the longest
-- prefix unless a regex (in order, case-insensitive) matches, "^~" stops
-- the regexes.
function T.test_match_picks_as_nginx()
    local r = route({
        { path = "/", backend = "root" },
        { path = "/api", backend = "api" },
        { path = "/api/v1", backend = "v1" },
        { path = "/exact", exact = true, backend = "exact" },
        { path = "^/api/.*\\.png$", regex = true, backend = "png" },
        { path = "^/API/", regex = true, backend = "upper" },
        { path = "/static", noregex = true, backend = "static" },
        { path = "^/static/.*\\.png$", regex = true, backend = "static-png" },
    })
    local cases = {
        { "/", "/" },
        { "/exact", "=/exact" },
        { "/exact/more", "/" },
        { "/api/v1/users", "~^/API/" },
        { "/api/x.png", "~^/api/.*\\.png$" },
        { "/apix", "/api" },
        { "/static/a.png", "/static" },
        { "/other", "/" },
    }
    for _, c in ipairs(cases) do
        local loc, pattern, err = routes.match(r, c[1])
        t.eq(err, nil, "err of " .. c[1] .. " (" .. tostring(pattern) .. ")")
        t.eq(path_of(loc), c[2], "location of " .. c[1])
    end
end

function T.test_match_without_prefix_is_nil()
    local r = route({ { path = "/a", backend = "a" } })
    t.eq(routes.match(r, "/b"), nil, "location of /b")
end

function T.test_only_root_needs_no_match()
    t.eq(path_of(route({ { path = "/", backend = "a" } }).only), "/", "only")
    t.eq(route({ { path = "/", backend = "a" }, { path = "/b", backend = "b" } }).only, nil, "only with two")
end

function T.test_check_update_names_the_field()
    local cases = {
        { { upserts = { { name = "Example.com", locations = { { path = "/", backend = "b" } } } } }, "upserts[0].name: must be a lower-case DNS name" },
        { { upserts = { { name = "a.test", locations = {} } } }, "upserts[0].locations: must " },
        { { upserts = { { name = "a.test", locations = { { path = "x", backend = "b" } } } } }, 'upserts[0].locations[0].path: must start with "/"' },
        { { upserts = { { name = "a.test", locations = { { path = "^/(", regex = true, backend = "b" } } } } }, "upserts[0].locations[0].path: not a regex PCRE compiles" },
        { { upserts = { { name = "a.test", locations = { { path = "/", backend = "b" }, { path = "/", backend = "c" } } } } }, 'upserts[0].locations[1]: prefix "/" is also upserts[0].locations[0]' },
        { { upserts = { { name = "a.test", locations = { { path = "/", backend = "b", read_timeout = 0 } } } } }, "upserts[0].locations[0].read_timeout: must be a whole number of seconds" },
        { { upserts = { { name = "a.test", locations = { { path = "/", backend = "b", ingress = "ns/i" } } } } }, "upserts[0].locations[0]: ingress and auth_file need a profile" },
        { { upserts = { { name = "a.test", locations = { { path = "/", backend = "b", bogus = true } } } } }, "upserts[0].locations[0].bogus: unknown field" },
        { { upserts = { { name = "a.test", locations = { { path = "/", backend = "b", metric = "ns\1i\1s\1/" } } } } }, "upserts[0].locations[0].metric: must be 5 labels" },
        { { upserts = { { name = "a.test", locations = { { path = "/", backend = "b", metric = "ns\1i\1s\1/\1a\ntest" } } } } }, "upserts[0].locations[0].metric: must be 5 labels" },
    }
    for _, c in ipairs(cases) do
        local update, err = routes.check_update(c[1])
        t.eq(update, nil, "update")
        t.contains(err, c[2], "reason")
    end
    local update, err = routes.check_update({ upserts = { { name = "*.a.test", locations = { { path = "/", backend = "b", metric = "ns\1i\1s\1/\1*.a.test" } } },
        { name = "_", locations = { { path = "/", backend = "d" } } } }, removes = { "old.test" } })
    t.eq(err, nil, "err of a good update")
    t.eq(#update.upserts, 2, "upserts")
    t.eq(update.removes, { "old.test" }, "removes")
end

function T.test_write_lookup_and_list()
    local d = t.fresh_dict()
    local update = assert(routes.check_update({ upserts = {
        { name = "a.test", locations = { { path = "/", backend = "a" } } },
        { name = "*.b.test", locations = { { path = "/", backend = "wild" } } },
        { name = "_", locations = { { path = "/", backend = "default" } } },
    } }))
    t.eq(routes.write(d, update), 1, "version")
    t.eq(routes.count(d), 3, "count")
    t.eq(routes.lookup(d, "a.test").only.backend, "a", "a.test")
    t.eq(routes.lookup(d, "x.b.test").only.backend, "wild", "x.b.test")
    t.eq(routes.lookup(d, "y.x.b.test"), nil, "two labels under a wildcard")
    t.eq(routes.lookup(d, "c.test"), nil, "c.test")
    t.eq(routes.default(d).only.backend, "default", "default")
    local names = {}
    for _, r in ipairs(cjson.decode(routes.list(d)).routes) do
        names[#names + 1] = r.name
    end
    t.eq(names, { "*.b.test", "_", "a.test" }, "listed names")
    t.eq(routes.write(d, assert(routes.check_update({ removes = { "a.test" } }))), 2, "version of the remove")
    t.eq(routes.lookup(d, "a.test"), nil, "a.test after its remove")
    t.eq(routes.count(d), 2, "count after the remove")
end

return T
