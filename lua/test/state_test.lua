-- Unit tests of restysync.state: the saved state the master loads at a
-- cold start, whole, without routes to missing profiles, and never failing
-- on a bad file.
local t = require "testing"
local cjson = require "cjson"
local state = require "restysync.state"
local backends = require "restysync.backends"
local routes = require "restysync.routes"

local T = {}

local P1 = "@restysync_p_00000000000000000000000000000001"
local P2 = "@restysync_p_00000000000000000000000000000002"

-- saved is a state file as the agent writes it: two backends, a plain
-- route, one on profile P1 and one on profile P2.
local function saved()
    return cjson.encode({
        config_hash = "c1",
        profiles = { P1, P2 },
        backends = { upserts = {
            { name = "default/a:80", endpoints = { { address = "10.0.0.1", port = 80 } } },
            { name = "default/b:80", endpoints = { { address = "10.0.0.2", port = 80 } } },
        } },
        routes = { upserts = {
            { name = "plain.test", https = false, locations = { { path = "/", backend = "default/a:80" } } },
            { name = "one.test", https = false, locations = { { path = "/", backend = "default/a:80", profile = P1 } } },
            { name = "two.test", https = true, locations = {
                { path = "/", backend = "default/a:80" },
                { path = "/b", backend = "default/b:80", profile = P2 } } },
        } },
    })
end

local function hosts(d)
    local out = {}
    for _, r in ipairs(cjson.decode(routes.list(d)).routes) do
        out[#out + 1] = r.name
    end
    table.sort(out)
    return out
end

function T.test_restore_stores_every_kind()
    local d = t.fresh_dict()
    local summary, err = state.restore(d, saved(), "c1", { P1, P2 })
    t.eq(err, nil, "err")
    t.eq(summary.backends, 2, "backends")
    t.eq(summary.routes, 3, "routes")
    t.eq(summary.dropped_routes, 0, "dropped")
    t.eq(backends.count(d), 2, "backends stored")
    t.eq(hosts(d), { "one.test", "plain.test", "two.test" }, "hosts")
    t.ok(routes.lookup(d, "two.test"), "two.test is routed")
end

-- A route whose profile the starting nginx.conf lacks would be a 500 (a
-- missing named location): it is left out, the others are stored.
function T.test_restore_leaves_out_routes_to_missing_profiles()
    local d = t.fresh_dict()
    local summary, err = state.restore(d, saved(), "c2", { P1 })
    t.eq(err, nil, "err")
    t.eq(summary.dropped_routes, 1, "dropped")
    t.eq(hosts(d), { "one.test", "plain.test" }, "hosts")
    t.eq(backends.count(d), 2, "backends stored")
end

-- A Gateway route whose share goes to a backend TLS location the starting
-- nginx.conf lacks is left out too (the router would close its
-- connections); one whose location is listed is stored.
function T.test_restore_leaves_out_routes_to_missing_backend_tls()
    local btls = "@restysync_btls_0123456789abcdef01234567"
    local function gateway_route(name, tls)
        return { name = name, https = false, ordered = true, locations = { { path = "/", backend = "default/a:80",
            rule = { backends = { { backend = "default/a:80", weight = 1, tls = tls } } } } } }
    end
    local raw = cjson.encode({ config_hash = "c1",
        backends = { upserts = { { name = "default/a:80", endpoints = { { address = "10.0.0.1", port = 80 } } } } },
        routes = { upserts = { gateway_route("127.0.0.1:80 kept.test", btls),
            gateway_route("127.0.0.1:80 dropped.test", "@restysync_btls_00000000000000000000ffff") } } })
    local d = t.fresh_dict()
    local summary, err = state.restore(d, raw, "c1", { P1, btls })
    t.eq(err, nil, "err")
    t.eq(summary.dropped_routes, 1, "dropped")
    t.eq(hosts(d), { "127.0.0.1:80 kept.test" }, "hosts")
end

-- A file cut short (the agent killed mid-write cannot leave one, the
-- rename is atomic, but a full disk or a hand edit can) stores nothing.
function T.test_restore_refuses_a_truncated_file()
    local d = t.fresh_dict()
    local raw = saved()
    for _, bad in ipairs({ string.sub(raw, 1, #raw - 7), "", "[]", "null", "\0\1garbage" }) do
        local summary, err = state.restore(d, bad, "c1", { P1, P2 })
        t.eq(summary, nil, "summary of " .. string.format("%q", string.sub(bad, 1, 20)))
        t.ok(err, "reason")
        t.eq(backends.count(d), 0, "backends stored")
        t.eq(routes.count(d), 0, "routes stored")
    end
end

-- A kind that does not check is left out and named; the others are stored.
function T.test_restore_leaves_out_a_kind_that_does_not_check()
    local d = t.fresh_dict()
    local s = cjson.decode(saved())
    s.certificates = { upserts = { { name = "c", hosts = { "two.test" }, cert = "not a PEM", key = "nor this" } } }
    local summary, err, partial = state.restore(d, cjson.encode(s), "c1", { P1, P2 })
    t.eq(summary, nil, "summary")
    t.contains(err, "certificates: upserts[0].cert: does not parse", "reason")
    t.eq(partial.backends, 2, "backends")
    t.eq(partial.routes, 3, "routes")
    t.eq(routes.count(d), 3, "routes stored")
end

local function write_file(path, raw)
    local f = assert(io.open(path, "wb"))
    f:write(raw)
    f:close()
end

-- load reads the file and never raises: a corrupt or missing file is
-- logged and nothing is stored. (The workers may not write nginx's prefix:
-- the files of this test are in /tmp.)
function T.test_load_never_raises()
    local d = t.fresh_dict()
    local path = os.tmpname()
    os.remove(path)
    t.eq(state.load(d, "c1", {}, path), false, "no file")

    write_file(path, '{"backends":{"upserts":[{"name":"x","endpoints":[{"address":')
    t.eq(state.load(d, "c1", {}, path), false, "corrupt file")
    t.eq(backends.count(d), 0, "backends after a corrupt file")

    write_file(path, saved())
    t.eq(state.load(d, "c1", { P1, P2 }, path), true, "good file")
    t.eq(routes.count(d), 3, "routes")
    os.remove(path)
end

return T
