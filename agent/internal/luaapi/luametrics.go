package luaapi

import (
	"bytes"
	"encoding/json"
	"io"
)

// DecodeLuaMetrics reads the body of GET /metrics as json.Unmarshal reads
// it into a LuaMetrics, errors included. The body is as long as the
// backends array (4 MB at 50,000), read on every Prometheus scrape, so the
// object Lua writes (api.lua's get_metrics: its keys spelled exactly, each
// once, integers, a boolean, nginx an object or null) is read here in one
// pass, where encoding/json went over it three times (its check of the
// whole value, finding the end of the array, then BackendList's read).
// Anything else is left to json.Unmarshal.
func DecodeLuaMetrics(data []byte) (LuaMetrics, error) {
	if m, ok := readLuaMetrics(data); ok {
		return m, nil
	}
	var m LuaMetrics
	err := json.Unmarshal(data, &m)
	return m, err
}

// luaMetricsKeys are LuaMetrics's keys; a bit each in readLuaMetrics's seen.
var luaMetricsKeys = [...]string{"backends", "balancer_rebuilds", "regex_failures", "certificates", "counting", "api_denied", "loop_refused", "nginx"}

func readLuaMetrics(data []byte) (LuaMetrics, bool) {
	r := backendReader{data: data}
	return r.luaMetrics()
}

// StreamHint is the size of the last answer ReadLuaMetrics read, which it
// takes as the next one's.
type StreamHint struct {
	PackedBytes int // of the backends list's entries (BackendList)
	NameBytes   int // of their names, as read
}

// ReadLuaMetrics reads the body of GET /metrics from src as
// DecodeLuaMetrics decodes it whole, holding 64 KB of it at a time: at
// 50,000 backends the whole answer is 4 MB that each Prometheus scrape
// read into one buffer, decoded and threw away. ok is false when the
// answer is not what Lua writes (see DecodeLuaMetrics) or has an entry or
// key over 32 KB: what was read is gone, and the caller reads the answer
// again whole for DecodeLuaMetrics. err is src's error (not io.EOF),
// whatever was read. hint is the last answer's size (the first time, the
// zero StreamHint); next, this one's.
func ReadLuaMetrics(src io.Reader, hint StreamHint) (m LuaMetrics, next StreamHint, ok bool, err error) {
	r := backendReader{src: src, hint: hint}
	m, ok = r.luaMetrics()
	if r.err != nil {
		return LuaMetrics{}, hint, false, r.err
	}
	if !ok {
		return LuaMetrics{}, hint, false, nil
	}
	return m, StreamHint{PackedBytes: len(m.Backends.packed), NameBytes: len(m.Backends.names)}, true, nil
}

// luaMetrics reads the object, and all there is after it.
func (r *backendReader) luaMetrics() (LuaMetrics, bool) {
	var m LuaMetrics
	r.refill()
	r.space()
	if !r.eat('{') {
		return m, false
	}
	seen := 0
	for first := true; ; first = false {
		key, done, ok := r.field(first)
		if !ok {
			return m, false
		}
		if done {
			break
		}
		k := bytesIndex(luaMetricsKeys[:], key)
		if k < 0 || seen&(1<<k) != 0 {
			return m, false // another key, or one twice
		}
		seen |= 1 << k
		var err error
		switch luaMetricsKeys[k] {
		case "backends":
			m.Backends, ok = r.array()
		case "balancer_rebuilds":
			m.BalancerRebuilds, err = r.integer()
		case "regex_failures":
			m.RegexFailures, err = r.integer()
		case "certificates":
			var v int64
			v, err = r.integer()
			m.Certificates = int(v)
		case "counting":
			m.Counting, ok = r.boolean()
		case "api_denied":
			m.APIDenied, err = r.integer()
		case "loop_refused":
			m.LoopRefused, err = r.integer()
		case "nginx":
			ok = r.nginx(&m.Nginx)
		}
		if !ok || err != nil {
			return m, false
		}
	}
	r.refill()
	r.space()
	return m, r.pos == len(r.data) && (r.src == nil || r.eof)
}

func bytesIndex(keys []string, key []byte) int {
	for i, k := range keys {
		if string(key) == k {
			return i
		}
	}
	return -1
}

// boolean reads true or false.
func (r *backendReader) boolean() (bool, bool) {
	for _, lit := range []string{"true", "false"} {
		if bytes.HasPrefix(r.data[r.pos:], []byte(lit)) {
			r.pos += len(lit)
			return lit == "true", true
		}
	}
	return false, false
}

// nginx reads null or an object into *p, with encoding/json: it is small.
// The object's end is found by counting braces outside strings; what is
// between is then json.Unmarshal's to check.
func (r *backendReader) nginx(p **NginxProcess) bool {
	if bytes.HasPrefix(r.data[r.pos:], []byte("null")) {
		r.pos += len("null")
		*p = nil
		return true
	}
	if r.pos >= len(r.data) || r.data[r.pos] != '{' {
		return false
	}
	start, depth, inString := r.pos, 0, false
	for ; r.pos < len(r.data); r.pos++ {
		c := r.data[r.pos]
		switch {
		case inString && c == '\\':
			r.pos++
		case c == '"':
			inString = !inString
		case inString:
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			depth--
		}
		if depth == 0 {
			r.pos++
			var n NginxProcess
			if json.Unmarshal(r.data[start:r.pos], &n) != nil {
				return false
			}
			*p = &n
			return true
		}
	}
	return false
}
