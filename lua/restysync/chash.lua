-- restysync.chash: consistent hashing of a request value onto endpoints.
--
-- Why: upstream-hash-by sends every request with the same value (a URI, a
-- user header, a cookie) to the same endpoint, which keeps caches warm. A
-- plain "hash mod n" would move almost every value when one endpoint is
-- added; on a ring with virtual nodes, adding one endpoint to n moves only
-- about 1/(n+1) of the values, all of them to the new endpoint.
--
-- Each endpoint owns VNODES points on a 32-bit ring, derived from the MD5 of
-- its address:port alone, so an endpoint keeps its points across pushes and
-- every worker (and every nginx replica) builds the same ring. The points
-- are computed once per endpoint table and carried over with it; a rebuild
-- only merges and sorts them. A request hashes its value with CRC32 (cheap)
-- and takes the first point at or after it, by binary search. An endpoint
-- that restysync.health has taken out is passed over for the next owner on
-- the ring, so its values spread over the others instead of onto one.
--
-- Subsets (upstream-hash-by-subset): a value maps to the first `size`
-- distinct endpoints clockwise from it, and its requests take them in turn.
-- Adding or removing an endpoint changes a value's subset by at most that
-- endpoint, where ingress-nginx's fixed groups of consecutive endpoints
-- would regroup them all.
--
-- The ring also holds the balanced affinity cookies (restysync.affinity):
-- a cookie is a position on the ring, inside an arc its endpoint owns.

local health = require "restysync.health"

local ngx = ngx
local ngx_md5_bin = ngx.md5_bin
local ngx_crc32_long = ngx.crc32_long
local string_byte = string.byte
local math_floor = math.floor
local math_max = math.max
local math_min = math.min
local math_random = math.random
local table_sort = table.sort

local _M = { _VERSION = "0.1" }

-- VNODES points per endpoint (a multiple of 4: one MD5 gives four points),
-- fewer for very large backends so that a ring holds at most MAX_POINTS.
local VNODES = 160
local MAX_POINTS = 160000

local function vnodes_for(n)
    return math_max(4, math_min(VNODES, math_floor(MAX_POINTS / math_max(n, 1) / 4) * 4))
end

-- points returns the ring points of ep (cached in its table).
local function points(ep, vnodes)
    if ep.ring_vnodes == vnodes then
        return ep.ring_points
    end
    local list = {}
    for i = 0, vnodes / 4 - 1 do
        local d = ngx_md5_bin(ep.key .. "#" .. i)
        for k = 0, 3 do
            local b1, b2, b3, b4 = string_byte(d, 4 * k + 1, 4 * k + 4)
            list[#list + 1] = ((b4 * 256 + b3) * 256 + b2) * 256 + b1
        end
    end
    ep.ring_points, ep.ring_vnodes = list, vnodes
    return list
end

-- build returns the ring of endpoints: { points = {p1 <= p2 <= ...},
-- owners = {ep, ...} }.
function _M.build(endpoints)
    local vnodes = vnodes_for(#endpoints)
    local pairs_ = {}
    for i = 1, #endpoints do
        local ep = endpoints[i]
        local list = points(ep, vnodes)
        for k = 1, #list do
            pairs_[#pairs_ + 1] = { list[k], ep }
        end
    end
    -- Ties (rare) are broken by address so every worker agrees.
    table_sort(pairs_, function(x, y)
        if x[1] ~= y[1] then
            return x[1] < y[1]
        end
        return x[2].key < y[2].key
    end)
    local ring = { points = {}, owners = {}, endpoints = endpoints }
    for i = 1, #pairs_ do
        ring.points[i], ring.owners[i] = pairs_[i][1], pairs_[i][2]
    end
    return ring
end

-- find returns the position of the first point at or after h (wrapping).
local function find(ring_points, h)
    local lo, hi = 1, #ring_points
    if h > ring_points[hi] then
        return 1
    end
    while lo < hi do
        local mid = math_floor((lo + hi) / 2)
        if ring_points[mid] < h then
            lo = mid + 1
        else
            hi = mid
        end
    end
    return lo
end

-- pick returns the endpoint of ring for value at time now: its owner, or
-- the next usable owner along the ring when that one is down.
function _M.pick(ring, value, now)
    local ring_points, owners = ring.points, ring.owners
    local n = #ring_points
    local i = find(ring_points, ngx_crc32_long(value))
    local first = owners[i]
    if health.usable(first, now) then
        return first
    end
    local seen = { [first] = true }
    for k = 1, n - 1 do
        local ep = owners[(i + k - 1) % n + 1]
        if not seen[ep] then
            if health.usable(ep, now) then
                return ep
            end
            seen[ep] = true
        end
    end
    return first -- all down: try the owner anyway
end

-- RING is the size of the 32-bit ring.
local RING = 4294967296

-- owner returns the endpoint that owns position pos (0 <= pos < 2^32).
function _M.owner(ring, pos)
    return ring.owners[find(ring.points, pos)]
end

-- arcs returns, for each endpoint of ring, the arcs of the ring it owns
-- (computed once per ring): { total = their length, ends = the running
-- sum of their lengths, index = the ring position of each arc's point }.
-- An arc is (previous point, point]: the positions the point's owner gets.
local function arcs(ring)
    local all = ring.arcs
    if all then
        return all
    end
    all = {}
    local ring_points, owners = ring.points, ring.owners
    local n = #ring_points
    for i = 1, n do
        local lo = i > 1 and ring_points[i - 1] or ring_points[n] - RING
        local length = ring_points[i] - lo
        if length > 0 then
            local ep = owners[i]
            local a = all[ep]
            if not a then
                a = { total = 0, ends = {}, index = {} }
                all[ep] = a
            end
            a.total = a.total + length
            a.ends[#a.ends + 1] = a.total
            a.index[#a.index + 1] = i
        end
    end
    ring.arcs = all
    return all
end

-- position returns a position on ring that ep owns, drawn uniformly from
-- the arcs ep owns: where the hash of a new client would fall, given that
-- it fell to ep. When endpoints are added, a point of a new one may come
-- to lie between the position and ep's point; the position then belongs
-- to the new endpoint: about 1/(n+1) of the positions move. nil if ep
-- owns no arc of ring.
function _M.position(ring, ep)
    local a = arcs(ring)[ep]
    if not a then
        return nil
    end
    local r = math_random(a.total)
    local j = find(a.ends, r)
    local pos = ring.points[a.index[j]] - (a.ends[j] - r)
    if pos < 0 then
        pos = pos + RING
    end
    return pos
end

-- pick_subset returns the endpoint of ring for value at time now when
-- values map to subsets of size endpoints: the turn-th of the subset (turn
-- counts requests), or the next usable one of it when that one is down,
-- or, when all of the subset is down, the next usable owner along the ring.
function _M.pick_subset(ring, value, size, turn, now)
    local all = ring.endpoints
    local subset
    if size >= #all then
        subset = all
    else
        local ring_points, owners = ring.points, ring.owners
        local n = #ring_points
        local i = find(ring_points, ngx_crc32_long(value))
        subset = {}
        local count, seen = 0, {}
        for k = 0, n - 1 do
            local ep = owners[(i + k - 1) % n + 1]
            if not seen[ep] then
                seen[ep] = true
                count = count + 1
                subset[count] = ep
                if count == size then
                    break
                end
            end
        end
    end
    local m = #subset
    for k = 0, m - 1 do
        local ep = subset[(turn + k) % m + 1]
        if health.usable(ep, now) then
            return ep
        end
    end
    return _M.pick(ring, value, now)
end

-- Private functions, reachable by tests.
_M.find = find

return _M
