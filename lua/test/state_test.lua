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

-- chunked writes a state as the agent writes it: a manifest (returned)
-- naming, for each kind, chunk files in dir holding its upserts, two
-- backends in one chunk, the routes spread over two. Each chunk's name is
-- 32 hex digits (the agent's hash of its content; any such name reads).
local function chunked(dir)
    local s = cjson.decode(saved())
    local n = 0
    local function chunk(items)
        n = n + 1
        local name = string.format("%032x", n)
        local f = assert(io.open(dir .. name, "wb"))
        f:write(cjson.encode(items))
        f:close()
        return name
    end
    local r = s.routes.upserts
    return cjson.encode({
        config_hash = s.config_hash,
        profiles = s.profiles,
        certificates = { chunks = {} },
        backends = { chunks = { chunk(s.backends.upserts) } },
        routes = { chunks = { chunk({ r[1] }), chunk({ r[2], r[3] }) } },
    })
end

-- temp_dir makes an empty folder for chunk files and returns its path,
-- ending in "/".
local function temp_dir()
    local path = os.tmpname()
    os.remove(path)
    assert(os.execute("mkdir -m 0700 " .. path))
    return path .. "/"
end

local function remove_dir(dir)
    os.execute("rm -rf " .. dir)
end

-- A manifest's sections name chunk files: their upserts are stored as if
-- the sections held them.
function T.test_restore_reads_the_chunks_a_manifest_names()
    local dir = temp_dir()
    local d = t.fresh_dict()
    local summary, err = state.restore(d, chunked(dir), "c1", { P1, P2 }, dir)
    remove_dir(dir)
    t.eq(err, nil, "err")
    t.eq(summary.backends, 2, "backends")
    t.eq(summary.routes, 3, "routes")
    t.eq(hosts(d), { "one.test", "plain.test", "two.test" }, "hosts")
end

-- A chunk that is missing, cut short, not a list, or a name that is not a
-- chunk's (a path out of the folder) refuses the whole state: nothing is
-- stored, not even the kinds whose chunks read.
function T.test_restore_refuses_the_state_for_a_bad_chunk()
    local function write(path, raw)
        local f = assert(io.open(path, "wb"))
        f:write(raw)
        f:close()
    end
    local cases = {
        { "missing", function(dir, m) os.remove(dir .. m.routes.chunks[2]) end, "chunk" },
        { "cut short", function(dir, m)
            local f = assert(io.open(dir .. m.routes.chunks[2], "rb"))
            local raw = f:read("*a")
            f:close()
            write(dir .. m.routes.chunks[2], string.sub(raw, 1, #raw - 5))
        end, "is not valid JSON" },
        { "an object", function(dir, m) write(dir .. m.routes.chunks[1], '{"name":"x"}') end, "is not a JSON list" },
        { "empty", function(dir, m) write(dir .. m.backends.chunks[1], "") end, "is not a JSON list" },
        { "a path", function(_, m) m.routes.chunks[1] = "../" .. m.routes.chunks[1] end, "is not a chunk's name" },
        { "not a list", function(_, m) m.routes.chunks = "00000000000000000000000000000001" end, "chunks is not a list" },
        { "upserts too", function(_, m) m.routes.upserts = {} end, "both chunks and upserts" },
    }
    for _, case in ipairs(cases) do
        local dir = temp_dir()
        local m = cjson.decode(chunked(dir))
        case[2](dir, m)
        local d = t.fresh_dict()
        local summary, err, partial = state.restore(d, cjson.encode(m), "c1", { P1, P2 }, dir)
        remove_dir(dir)
        t.eq(summary, nil, case[1] .. ": summary")
        t.eq(partial, nil, case[1] .. ": partial")
        t.contains(err, case[3], case[1] .. ": reason")
        t.eq(backends.count(d), 0, case[1] .. ": backends stored")
        t.eq(routes.count(d), 0, case[1] .. ": routes stored")
    end
end

-- The chunks together are bounded like a single file was.
function T.test_restore_bounds_the_chunks_read()
    local dir = temp_dir()
    local d = t.fresh_dict()
    local summary, err = state.restore(d, chunked(dir), "c1", { P1, P2 }, dir, { left = 300 })
    remove_dir(dir)
    t.eq(summary, nil, "summary")
    t.contains(err, "larger than", "reason")
    t.eq(backends.count(d), 0, "backends stored")
end

-- load reads the chunks from restysync.state.d beside the manifest.
function T.test_load_reads_chunks_beside_the_manifest()
    local top = temp_dir()
    local dir = top .. "restysync.state.d/"
    assert(os.execute("mkdir -m 0700 " .. dir))
    write_file(top .. "restysync.state", chunked(dir))
    local d = t.fresh_dict()
    local loaded = state.load(d, "c1", { P1, P2 }, top .. "restysync.state")
    remove_dir(top)
    t.eq(loaded, true, "loaded")
    t.eq(routes.count(d), 3, "routes")
    t.eq(backends.count(d), 2, "backends")
end

return T
