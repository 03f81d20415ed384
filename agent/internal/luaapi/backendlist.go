package luaapi

import (
	"encoding/json"
	"errors"
	"unicode/utf8"
)

// BackendList is the "backends" array of GET /metrics: one entry per
// backend, 50,000 at 50,000 Ingresses, read on every Prometheus scrape.
// encoding/json's reflection made that read half a scrape's CPU and a
// string and more per entry, so UnmarshalJSON reads the array as Lua writes
// it ({"name":…,"endpoints":…,"requests":…,"failures":…}, keys spelled
// exactly, integers) by hand, with every name in one string. Anything else
// (another key or spelling, a number with a fraction or exponent, null) is
// handed to encoding/json whole, so the result is always what
// encoding/json gives, errors included.
type BackendList []BackendMetrics

// UnmarshalJSON reads a JSON array of backends.
func (l *BackendList) UnmarshalJSON(data []byte) error {
	if list, ok := readBackends(data); ok {
		*l = list
		return nil
	}
	var slow []BackendMetrics
	if err := json.Unmarshal(data, &slow); err != nil {
		return err
	}
	*l = slow
	return nil
}

// backendReader reads the array Lua writes; ok false means "not that
// shape": the caller reads it with encoding/json instead.
type backendReader struct {
	data []byte
	pos  int
	// names holds every name read, one after another; spans are where
	// each entry's is, turned into substrings of one string at the end.
	names []byte
	spans []int
}

var errShape = errors.New("not the shape Lua writes")

func readBackends(data []byte) (BackendList, bool) {
	r := backendReader{data: data}
	list, ok := r.array()
	r.space()
	return list, ok && r.pos == len(data)
}

// array reads the array of backends that starts at r.pos, up to its ']'.
func (r *backendReader) array() (BackendList, bool) {
	r.space()
	if !r.eat('[') {
		return nil, false
	}
	// Every entry is one object: a '{' count is a bound (names may hold
	// more), taken without allocating.
	n := 0
	for _, c := range r.data[r.pos:] {
		if c == '{' {
			n++
		}
	}
	list := make(BackendList, 0, n)
	r.names = make([]byte, 0, (len(r.data)-r.pos)/2)
	r.spans = make([]int, 0, 2*n)
	r.space()
	if !r.eat(']') {
		for {
			b, err := r.backend()
			if err != nil {
				return nil, false
			}
			list = append(list, b)
			r.space()
			if r.eat(']') {
				break
			}
			if !r.eat(',') {
				return nil, false
			}
		}
	}
	all := string(r.names)
	for i := range list {
		list[i].Name = all[r.spans[2*i]:r.spans[2*i+1]]
	}
	return list, true
}

func (r *backendReader) space() {
	for r.pos < len(r.data) {
		switch r.data[r.pos] {
		case ' ', '\t', '\n', '\r':
			r.pos++
		default:
			return
		}
	}
}

func (r *backendReader) eat(c byte) bool {
	if r.pos < len(r.data) && r.data[r.pos] == c {
		r.pos++
		return true
	}
	return false
}

// backend reads one object; its name is appended to r.names and its span
// to r.spans (an empty one when it has no "name").
func (r *backendReader) backend() (BackendMetrics, error) {
	var b BackendMetrics
	r.space()
	if !r.eat('{') {
		return b, errShape
	}
	start, end := len(r.names), len(r.names)
	for first := true; ; first = false {
		key, done, ok := r.field(first)
		if !ok {
			return b, errShape
		}
		if done {
			break
		}
		var err error
		switch string(key) {
		case "name":
			start = len(r.names)
			err = r.name()
			end = len(r.names)
		case "endpoints":
			var v int64
			v, err = r.integer()
			b.Endpoints = int(v)
		case "requests":
			b.Requests, err = r.integer()
		case "failures":
			b.Failures, err = r.integer()
		default:
			err = errShape
		}
		if err != nil {
			return b, err
		}
	}
	r.spans = append(r.spans, start, end)
	return b, nil
}

// field reads up to the next key of an object whose '{' is read, and
// returns the key with r.pos at its value; done at the object's '}'; ok
// false if what follows is no key, ',' or '}'. first says it is the
// object's first key (no ',' before it).
func (r *backendReader) field(first bool) (key []byte, done, ok bool) {
	r.space()
	if r.eat('}') {
		return nil, true, true
	}
	if !first && !r.eat(',') {
		return nil, false, false
	}
	r.space()
	if key, ok = r.plainKey(); !ok {
		return nil, false, false
	}
	r.space()
	if !r.eat(':') {
		return nil, false, false
	}
	r.space()
	return key, false, true
}

// plainKey reads a key without escapes; the bytes returned are r.data's.
func (r *backendReader) plainKey() ([]byte, bool) {
	if !r.eat('"') {
		return nil, false
	}
	start := r.pos
	for r.pos < len(r.data) {
		switch c := r.data[r.pos]; {
		case c == '"':
			r.pos++
			return r.data[start : r.pos-1], true
		case c == '\\' || c < 0x20:
			return nil, false
		}
		r.pos++
	}
	return nil, false
}

// name appends a JSON string to r.names, unescaped. Printable ASCII and
// the \/ Lua writes for every slash are read here; a string with any other
// escape or a byte past ASCII is decoded by encoding/json, which also
// replaces invalid UTF-8 as it would in the slow path.
func (r *backendReader) name() error {
	if !r.eat('"') {
		return errShape
	}
	start, mark := r.pos, len(r.names)
	for r.pos < len(r.data) {
		c := r.data[r.pos]
		switch {
		case c == '"':
			r.pos++
			return nil
		case c == '\\' && r.pos+1 < len(r.data) && r.data[r.pos+1] == '/':
			r.names = append(r.names, '/')
			r.pos += 2
			continue
		case c == '\\' || c < 0x20 || c >= utf8.RuneSelf:
			return r.escapedName(start, mark)
		}
		r.names = append(r.names, c)
		r.pos++
	}
	return errShape
}

// escapedName decodes the string that starts at start (after its quote)
// with encoding/json, in place of what name appended past mark.
func (r *backendReader) escapedName(start, mark int) error {
	end := start
	for end < len(r.data) && r.data[end] != '"' {
		if r.data[end] == '\\' {
			end++
		}
		end++
	}
	if end >= len(r.data) {
		return errShape
	}
	var s string
	if err := json.Unmarshal(r.data[start-1:end+1], &s); err != nil {
		return errShape
	}
	r.names = append(r.names[:mark], s...)
	r.pos = end + 1
	return nil
}

// integer reads a JSON number that is an integer within int64 (what Lua's
// %d writes); anything else is left to encoding/json.
func (r *backendReader) integer() (int64, error) {
	neg := r.eat('-')
	start := r.pos
	var v int64
	for r.pos < len(r.data) && r.data[r.pos] >= '0' && r.data[r.pos] <= '9' {
		v = v*10 + int64(r.data[r.pos]-'0')
		r.pos++
	}
	digits := r.pos - start
	// 18 digits cannot overflow; a leading 0 must be the only digit.
	if digits == 0 || digits > 18 || (digits > 1 && r.data[start] == '0') {
		return 0, errShape
	}
	if r.pos < len(r.data) {
		switch r.data[r.pos] {
		case '.', 'e', 'E':
			return 0, errShape
		}
	}
	if neg {
		v = -v
	}
	return v, nil
}
