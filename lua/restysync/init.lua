-- restysync: state shared by every module of the bundled Lua side.
--
-- init() runs in the nginx master (init_by_lua) on every start and every
-- HUP. It loads every module of restysync there, as OpenResty's libraries
-- recommend: the workers share the compiled code copy-on-write and never
-- read a module file themselves (they may run as a user that cannot), and a
-- module that fails to load fails the reload, which the agent reports,
-- instead of every request. It records the hash of the nginx.conf being loaded, which the config
-- API reports so the agent can tell that a reload took effect, and makes sure
-- the shared dict holds a boot id. dict:add keeps an existing boot id, and
-- the dict survives a HUP but not a cold start: a new boot id therefore means
-- "this nginx lost every backend the agent pushed". On such a cold start it
-- loads the state the agent saved (restysync.state), so nginx serves the
-- last good routes, backends and certificates from its first request; the
-- agent reads them back and pushes only what changed since. It also has the
-- config API read the agent's secret (restysync.api.load_secret), so a HUP
-- re-reads it.

local ngx = ngx
local io_open = io.open
local math_random = math.random
local math_randomseed = math.randomseed
local string_byte = string.byte
local string_format = string.format
local tostring = tostring
local type = type
local ipairs = ipairs
local error = error

local DICT_NAME = "restysync"
-- Counters live in a dict of their own: incr with an initial value may evict
-- other keys when the dict is full, which must never hit a backend.
local METRICS_DICT_NAME = "restysync_metrics"

local _M = { _VERSION = "0.1", DICT_NAME = DICT_NAME, METRICS_DICT_NAME = METRICS_DICT_NAME }

local config_hash = ""

-- MODULES are every module under lua/restysync but this one, loaded by
-- init(); a Go test keeps the list equal to the files.
local MODULES = {
    "restysync.access",
    "restysync.affinity",
    "restysync.api",
    "restysync.backends",
    "restysync.balancer",
    "restysync.canary",
    "restysync.certs",
    "restysync.chash",
    "restysync.check",
    "restysync.ewma",
    "restysync.fileaccess",
    "restysync.gateway",
    "restysync.health",
    "restysync.loop",
    "restysync.policy",
    "restysync.requests",
    "restysync.router",
    "restysync.routes",
    "restysync.state",
    "restysync.store",
}
_M.MODULES = MODULES

-- random_bytes returns n bytes from /dev/urandom, or nil and an error.
local function random_bytes(n)
    local f, err = io_open("/dev/urandom", "rb")
    if not f then
        return nil, err
    end
    local data = f:read(n)
    f:close()
    if not data or #data ~= n then
        return nil, "short read from /dev/urandom"
    end
    return data
end

local function to_hex(data)
    return (data:gsub(".", function(c)
        return string_format("%02x", string_byte(c))
    end))
end

-- new_boot_id returns 32 hex digits. /dev/urandom is the source; if it cannot
-- be read the clock and the pid stand in, which is still unique per start.
local function new_boot_id()
    local data, err = random_bytes(16)
    if data then
        return to_hex(data)
    end
    ngx.log(ngx.WARN, "restysync: no /dev/urandom (", err, "), boot id from clock and pid")
    math_randomseed(ngx.now() * 1000 + ngx.worker.pid())
    return string_format("%08x%08x%08x%08x", ngx.now() * 1000 % 0x100000000,
        ngx.worker.pid(), math_random(0, 0x7fffffff), math_random(0, 0x7fffffff))
end

-- seed gives this process its own random sequence: workers are forked from
-- the master and would otherwise all draw the same numbers.
local function seed()
    local data = random_bytes(4)
    local n
    if data then
        local b1, b2, b3, b4 = string_byte(data, 1, 4)
        n = ((b1 * 256 + b2) * 256 + b3) * 256 + b4
    else
        n = ngx.now() * 1000 + ngx.worker.pid()
    end
    math_randomseed(n)
end

-- dict returns the shared dict, or raises: a missing lua_shared_dict is a
-- broken nginx.conf, not a runtime condition.
function _M.dict()
    local d = ngx.shared[DICT_NAME]
    if not d then
        error("restysync: lua_shared_dict " .. DICT_NAME .. " is not defined")
    end
    return d
end

-- metrics_dict returns the dict of request counters, or nil when nginx.conf
-- has none (a config rendered by an older agent): counting is then skipped.
function _M.metrics_dict()
    return ngx.shared[METRICS_DICT_NAME]
end

-- gateway_locations are the Gateway servers' named locations routes jump
-- to that this nginx.conf has: those of retry codes
-- ("@restysync_retry_500_503") and of backend TLS
-- ("@restysync_btls_<hash>") = true.
local gateway_locations = {}

-- has_gateway_location says whether this nginx.conf has the Gateway
-- server location name: a route pushed before the reload that brings it,
-- kept after the reload that took it away, or met by a worker of the
-- config before a reload, is served without it.
function _M.has_gateway_location(name)
    return gateway_locations[name] == true
end

-- profile_locations are the profiles (named locations) this nginx.conf
-- has.
local profile_locations = {}

-- has_profile says whether this nginx.conf has the profile name. A worker
-- of the config before a reload, still finishing its connections, can
-- meet a route pushed for the new config, whose profile it lacks.
function _M.has_profile(name)
    return profile_locations[name] == true
end

-- init is called from init_by_lua_block with the hash of the nginx.conf,
-- the names of its profiles (the named locations routes jump to) and of
-- its Gateway server locations (gateway_locations).
function _M.init(hash, profiles, locations)
    if type(hash) ~= "string" then
        error("restysync.init: config hash must be a string")
    end
    if profiles ~= nil and type(profiles) ~= "table" then
        error("restysync.init: profiles must be a list of names")
    end
    if locations ~= nil and type(locations) ~= "table" then
        error("restysync.init: Gateway locations must be a list of names")
    end
    gateway_locations = {}
    for _, name in ipairs(locations or {}) do
        gateway_locations[name] = true
    end
    profile_locations = {}
    for _, name in ipairs(profiles or {}) do
        profile_locations[name] = true
    end
    config_hash = hash
    for i = 1, #MODULES do
        require(MODULES[i])
    end
    require("restysync.api").load_secret()
    require("restysync.loop").set_token(new_boot_id())
    local d = _M.dict()
    local ok, err = d:add("boot_id", new_boot_id())
    if not ok and err ~= "exists" then
        error("restysync.init: storing boot id: " .. tostring(err))
    end
    if ok then
        -- A cold start: the dict is empty. A failing init_by_lua would
        -- keep nginx from starting, so even an error load did not expect
        -- is only logged.
        local named = {}
        for _, list in ipairs({ profiles or {}, locations or {} }) do
            for _, name in ipairs(list) do
                named[#named + 1] = name
            end
        end
        local lok, loaded = pcall(require("restysync.state").load, d, hash, named)
        if not lok then
            ngx.log(ngx.ERR, "restysync: loading the saved state: ", tostring(loaded), ": serving nothing until the agent pushes")
        end
        d:set("restored", lok and loaded == true)
    end
end

-- init_worker is called from init_worker_by_lua_block.
function _M.init_worker()
    seed()
end

function _M.config_hash()
    return config_hash
end

function _M.boot_id()
    return _M.dict():get("boot_id")
end

return _M
