-- restysync.requests: request metrics per Ingress, under ingress-nginx's
-- names (the agent exports them as nginx_ingress_controller_*).
--
-- Cheap on the hot path: record() runs in the log phase, after the
-- response went out, and only adds to a table of the worker's own memory
-- (no shared-dict lock per request, no socket write as ingress-nginx's
-- monitor.lua does). A timer flushes each worker's table into the
-- restysync_requests dict about once a second; the agent's scrape reads the
-- dict (GET /metrics/requests of the config API, report()).
--
-- A series is one combination of labels: the location's namespace, Ingress
-- (or HTTPRoute) name, service and path and the route's host, which the
-- agent sends with each location ("metric", restysync.routes), and the
-- request's status, method and canary backend. The router hands the
-- location's labels to the balancer (ngx.ctx.restysync_metric) or, across
-- the jump to a profile, in $restysync_metric. A request no location
-- served (404, no route) has empty labels; with undefined_host its host is
-- the Host header, else the agent leaves it out (as ingress-nginx does
-- without --metrics-per-undefined-host).
--
-- Per series a worker keeps one flat array: the request count, then for
-- each histogram (HISTOGRAMS) its count, its sum and one count per bucket
-- (not cumulative: the first bucket whose bound holds the value; above
-- every bound only the count moves). The dict holds the same numbers, one
-- key per non-zero field: <tag> "\2" <series> "\2" <field index>, where
-- the tag names the bucket bounds, so that a reload with other bounds never
-- mixes them; report() drops the keys of other tags.
--
-- Bounded: a worker keeps at most MAX_SERIES series (a request of a new
-- one past that is only counted in "dropped"), methods outside METHODS are
-- "OTHER", statuses are nginx's numbers, and every other label comes from
-- the agent's configuration but the Host header with undefined_host. The
-- dict is LRU: when full, the oldest keys go.

local ngx = ngx
local ngx_var = ngx.var
local ngx_now = ngx.now
local ngx_log = ngx.log
local ngx_ERR = ngx.ERR
local ngx_req_start_time = ngx.req.start_time
local ngx_req_get_method = ngx.req.get_method
local tonumber = tonumber
local pairs = pairs
local ipairs = ipairs
local type = type
local tostring = tostring
local string_byte = string.byte
local string_find = string.find
local string_sub = string.sub
local string_gsub = string.gsub
local string_match = string.match
local string_gmatch = string.gmatch
local string_format = string.format
local table_concat = table.concat
local cjson = require "cjson"
local table_new = require "table.new"
local json_encode = cjson.encode

local _M = { _VERSION = "0.1" }

local DICT_NAME = "restysync_requests"
_M.DICT_NAME = DICT_NAME

-- MAX_SERIES bounds the series one worker holds.
local MAX_SERIES = 4096
-- FLUSH_SECONDS is how often a worker adds its counts to the dict.
local FLUSH_SECONDS = 1
-- MAX_HOST_BYTES bounds a Host header taken as a label (undefined_host).
local MAX_HOST_BYTES = 253

-- HISTOGRAMS are the histograms of a series, in the order of its array
-- (the agent reads them in this order): the value each observes and the
-- bounds it uses.
local HISTOGRAMS = {
    "request_duration", "response_duration", "connect_duration", "header_duration",
    "request_size", "response_size", "bytes_sent",
}
local BOUNDS_OF = { "time", "time", "time", "time", "length", "length", "size" }
_M.HISTOGRAMS = HISTOGRAMS

-- METHODS are the methods counted by name; any other is "OTHER", so that
-- a client cannot make series up.
local METHODS = { GET = "GET", HEAD = "HEAD", POST = "POST", PUT = "PUT", DELETE = "DELETE",
    CONNECT = "CONNECT", OPTIONS = "OPTIONS", TRACE = "TRACE", PATCH = "PATCH" }

-- UNMATCHED labels a request no location served: empty namespace,
-- Ingress, service, path and host.
local UNMATCHED = "\1\1\1\1"

-- The state of this worker, set by start().
local started = false
local undefined_host = false
local bounds = {}  -- kind -> list of bounds
local offset = {}  -- histogram index -> index of its count in the array
local width = 0    -- fields per series
local tag = ""
local series = {}  -- key -> array
local nseries = 0
local dirty = false
local dropped = 0
-- What record() reads: each is one nginx variable per request, the most
-- of what recording costs; start() leaves out what opts.skip names.
local read_response, read_connect, read_header, read_request_size, read_bytes_sent

-- valid_bounds says whether b is a list of 1 to 64 increasing finite numbers.
local function valid_bounds(b)
    if type(b) ~= "table" or #b == 0 or #b > 64 then
        return false
    end
    local last
    for i = 1, #b do
        local v = b[i]
        if type(v) ~= "number" or v ~= v or v == math.huge or v == -math.huge or (last and v <= last) then
            return false
        end
        last = v
    end
    return true
end

-- flush adds what this worker counted since the last flush to the dict.
-- It runs in the timer (and once more when the worker exits).
local function flush()
    if not dirty then
        return
    end
    dirty = false
    local d = ngx.shared[DICT_NAME]
    if not d then
        return
    end
    local prefix = tag .. "\2"
    for key, a in pairs(series) do
        if a[1] ~= 0 then
            local base = prefix .. key .. "\2"
            for i = 1, width do
                local v = a[i]
                if v ~= 0 then
                    local _, err = d:incr(base .. i, v, 0)
                    if err then
                        ngx_log(ngx_ERR, "restysync: request metrics: ", err)
                        break
                    end
                    a[i] = 0
                end
            end
        end
    end
end

-- tick is the flush timer's handler; at the worker's exit it runs once
-- more (premature), which flushes the last second.
local function tick()
    flush()
end

-- start turns recording on in this worker; init_worker_by_lua calls it
-- (nginx.conf has it only with the request metrics on). opts: time,
-- length and size, the bucket bounds of each kind of histogram,
-- undefined_host, and skip: histograms (name = true) not recorded, whose
-- fields stay 0.
function _M.start(opts)
    local skip = opts.skip or {}
    if type(skip) ~= "table" then
        error("restysync.requests.start: skip must be a table")
    end
    for name in pairs(skip) do
        local known = false
        for _, h in ipairs(HISTOGRAMS) do
            known = known or h == name
        end
        if not known then
            error("restysync.requests.start: no histogram " .. tostring(name))
        end
    end
    read_response = not skip.response_duration
    read_connect = not skip.connect_duration
    read_header = not skip.header_duration
    read_request_size = not skip.request_size
    read_bytes_sent = not (skip.response_size and skip.bytes_sent)
    for _, kind in ipairs({ "time", "length", "size" }) do
        if not valid_bounds(opts[kind]) then
            error("restysync.requests.start: " .. kind .. " must be 1 to 64 increasing numbers")
        end
        bounds[kind] = opts[kind]
    end
    undefined_host = opts.undefined_host == true
    width = 1
    local parts = {}
    for h = 1, #HISTOGRAMS do
        offset[h] = width + 1
        width = width + 2 + #bounds[BOUNDS_OF[h]]
    end
    for _, kind in ipairs({ "time", "length", "size" }) do
        parts[#parts + 1] = table_concat(bounds[kind], ",")
    end
    tag = string_format("%08x", ngx.crc32_long(table_concat(parts, ";")))
    local ok, err = ngx.timer.every(FLUSH_SECONDS, tick)
    if not ok then
        ngx_log(ngx_ERR, "restysync: request metrics: no flush timer: ", err)
        return
    end
    started = true
end

-- observe adds v to the histogram whose count is at a[base].
local function observe(a, base, b, v)
    a[base] = a[base] + 1
    a[base + 1] = a[base + 1] + v
    for i = 1, #b do
        if v <= b[i] then
            a[base + 1 + i] = a[base + 1 + i] + 1
            return
        end
    end
end

-- observe_var adds the nginx variable name, when it is one number, to
-- histogram h.
local function observe_var(a, h, b, name)
    local v = tonumber(ngx_var[name])
    if v then
        observe(a, offset[h], b, v)
    end
end

-- clean_host is the Host header as a label: control characters dropped,
-- bounded.
local function clean_host(host)
    host = string_gsub(host or "", "%c", "")
    if #host > MAX_HOST_BYTES then
        host = string_sub(host, 1, MAX_HOST_BYTES)
    end
    return host
end

-- record counts the request; restysync.balancer.log calls it in the log
-- phase with ngx.ctx and the backend entry that served it (nil for a
-- request no backend served).
function _M.record(ctx, entry)
    if not started then
        return
    end
    local metric = ctx.restysync_metric
    if not metric then
        metric = ngx_var.restysync_metric
        if not metric or metric == "" then
            metric = UNMATCHED
        end
    end
    if undefined_host and string_byte(metric, -1) == 1 then
        metric = metric .. clean_host(ngx_var.host)
    end
    local method = ngx_req_get_method()
    local key = metric .. "\1" .. ngx.status .. "\1" .. (METHODS[method] or "OTHER")
        .. "\1" .. (ctx.restysync_canary or "")
    local a = series[key]
    if not a then
        if nseries >= MAX_SERIES then
            dropped = dropped + 1
            return
        end
        a = table_new(width, 0)
        for i = 1, width do
            a[i] = 0
        end
        series[key] = a
        nseries = nseries + 1
    end
    dirty = true
    a[1] = a[1] + 1
    local time, length, size = bounds.time, bounds.length, bounds.size
    local elapsed = ngx_now() - ngx_req_start_time()
    if elapsed < 0 then
        elapsed = 0
    end
    observe(a, offset[1], time, elapsed)
    if entry then
        -- One value each: a retried request's lists are left out, as
        -- ingress-nginx does.
        if read_response then
            observe_var(a, 2, time, "upstream_response_time")
        end
        if read_connect then
            observe_var(a, 3, time, "upstream_connect_time")
        end
        if read_header then
            observe_var(a, 4, time, "upstream_header_time")
        end
    end
    if read_request_size then
        observe_var(a, 5, length, "request_length")
    end
    if read_bytes_sent then
        local v = tonumber(ngx_var.bytes_sent)
        if v then
            observe(a, offset[6], length, v)
            observe(a, offset[7], size, v)
        end
    end
end

-- report is the body of GET /metrics/requests: the bounds, and each series
-- of the current tag with every field, from the dict. Keys of another tag
-- (bounds before a reload) are deleted.
function _M.report()
    local d = ngx.shared[DICT_NAME]
    local head = json_encode({ tag = tag, time = bounds.time, length = bounds.length, size = bounds.size,
        histograms = HISTOGRAMS, dropped = dropped })
    local parts = {}
    if d and started then
        local prefix = tag .. "\2"
        local plen = #prefix
        local by_key = {}
        local keys = d:get_keys(0)
        for _, k in ipairs(keys) do
            if string_sub(k, 1, plen) ~= prefix then
                d:delete(k)
            else
                local sep = string_find(k, "\2[0-9]+$", plen + 1)
                if sep then
                    local key = string_sub(k, plen + 1, sep - 1)
                    local i = tonumber(string_sub(k, sep + 1))
                    local v = d:get(k)
                    if v and i and i >= 1 and i <= width then
                        local a = by_key[key]
                        if not a then
                            a = table_new(width, 0)
                            for j = 1, width do
                                a[j] = 0
                            end
                            by_key[key] = a
                        end
                        a[i] = v
                    end
                end
            end
        end
        for key, a in pairs(by_key) do
            parts[#parts + 1] = json_encode({ k = key, v = a })
        end
    end
    -- The series by hand: cjson writes an empty table as {}.
    return string_sub(head, 1, -2) .. ',"series":[' .. table_concat(parts, ",") .. "]}"
end

-- Processes --------------------------------------------------------------

-- USER_HZ is the unit of the CPU times in /proc/<pid>/stat: 100 on every
-- Linux architecture's user ABI.
local USER_HZ = 100

local function read_file(path)
    local f = io.open(path, "rb")
    if not f then
        return nil
    end
    local data = f:read("*a")
    f:close()
    return data
end

-- process_usage adds the CPU seconds and resident bytes of process pid
-- to out.
local function process_usage(pid, out)
    local stat = read_file("/proc/" .. pid .. "/stat")
    if not stat then
        return
    end
    -- The fields after the command, which may hold spaces, in ().
    local rest = string_match(stat, "%) (.*)$")
    if not rest then
        return
    end
    local fields = {}
    for f in string_gmatch(rest, "%S+") do
        fields[#fields + 1] = f
    end
    -- fields[1] is the state (field 3): utime and stime are fields 14, 15.
    local utime, stime = tonumber(fields[12]), tonumber(fields[13])
    if not utime or not stime then
        return
    end
    out.procs = out.procs + 1
    out.cpu_seconds = out.cpu_seconds + (utime + stime) / USER_HZ
    local status = read_file("/proc/" .. pid .. "/status") or ""
    local rss = tonumber(string_match(status, "VmRSS:%s*(%d+) kB"))
    if rss then
        out.resident_bytes = out.resident_bytes + rss * 1024
    end
end

-- nginx reports nginx as ingress-nginx's process collector does: the
-- processes (the master, from nginx.pid in the prefix, and its children:
-- workers, cache loader and manager), their CPU seconds and resident
-- memory, and the connections stub_status counts (nil when nginx has no
-- stub_status module).
function _M.nginx()
    local out = { procs = 0, cpu_seconds = 0, resident_bytes = 0 }
    local prefix = ngx.config.prefix()
    if string_sub(prefix, -1) ~= "/" then
        prefix = prefix .. "/"
    end
    local master = tonumber(string_match(read_file(prefix .. "nginx.pid") or "", "%d+"))
    local pids = {}
    if master then
        pids[1] = master
        local children = read_file("/proc/" .. master .. "/task/" .. master .. "/children") or ""
        for pid in string_gmatch(children, "%d+") do
            pids[#pids + 1] = pid
        end
    end
    if #pids <= 1 then
        -- No master known, or no children listed: this worker at least.
        pids[#pids + 1] = ngx.worker.pid()
    end
    for _, pid in ipairs(pids) do
        process_usage(pid, out)
    end
    local active = tonumber(ngx_var.connections_active)
    if active then
        out.connections = {
            active = active,
            reading = tonumber(ngx_var.connections_reading) or 0,
            writing = tonumber(ngx_var.connections_writing) or 0,
            waiting = tonumber(ngx_var.connections_waiting) or 0,
        }
    end
    return out
end

-- Private functions, reachable by tests.
setmetatable(_M, { __index = {
    flush = flush,
    valid_bounds = valid_bounds,
    clean_host = clean_host,
} })

return _M
