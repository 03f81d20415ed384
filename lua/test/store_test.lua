-- Unit tests of restysync.store: the update lock and all-or-nothing writes.
local t = require "testing"
local store = require "restysync.store"

local T = {}

function T.test_apply_writes_in_order_and_deletes()
    local d = t.fresh_dict()
    d:set("gone", "x")
    t.eq(store.apply(d, { { "a", "1" }, { "gone" }, { "version", 1 } }, 1, "things"), 1, "version")
    t.eq(d:get("a"), "1", "a")
    t.eq(d:get("gone"), nil, "gone")
end

-- A write the dict has no room for puts back every value it replaced,
-- answers 507 and burns the version number.
function T.test_apply_undoes_a_write_that_does_not_fit()
    local d = ngx.shared.restysync_test_small
    d:flush_all()
    d:flush_expired()
    d:set("kept", "old")
    d:set("stamp", 1)
    local huge = string.rep("x", 256 * 1024)
    local version, status, reason = store.apply(d, {
        { "kept", "new" },
        { "stamp", 2, stamp = true },
        { "added", "yes" },
        { "huge", huge },
    }, 2, "things")
    t.eq(version, nil, "version")
    t.eq(status, 507, "status")
    t.contains(reason, "storing huge: no memory; nothing was changed", "reason")
    t.eq(d:get("kept"), "old", "kept")
    t.eq(d:get("stamp"), 1, "stamp")
    t.eq(d:get("added"), nil, "added")
    t.eq(d:get("version"), 2, "version burnt")
end

function T.test_lock_is_exclusive()
    local d = t.fresh_dict()
    t.ok(store.lock(d), "first lock")
    local ok, err = d:safe_add("lock", true)
    t.eq(ok, false, "a second writer's add")
    t.eq(err, "exists", "its reason")
    store.unlock(d)
    t.ok(store.lock(d), "lock after unlock")
    store.unlock(d)
end

function T.test_names_and_next_version()
    local d = t.fresh_dict()
    d:set("b:z", 1)
    d:set("b:a", 1)
    d:set("rt:a", 1)
    t.eq(store.names(d, "b:"), { "a", "z" }, "names")
    t.eq(store.next_version(d), 1, "first version")
    d:set("version", 41)
    t.eq(store.next_version(d), 42, "next version")
end

return T
