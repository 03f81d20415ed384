package luaapi

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"iter"
	"strings"
	"unicode/utf8"
)

// BackendList is the "backends" array of GET /metrics: one entry per
// backend, 50,000 at 50,000 Ingresses, read on every Prometheus scrape.
// encoding/json's reflection made that read half a scrape's CPU and a
// string and more per entry, so UnmarshalJSON reads the array as Lua writes
// it ({"name":…,"endpoints":…,"requests":…,"failures":…}, keys spelled
// exactly, integers) by hand. Anything else (another key or spelling, a
// number with a fraction or exponent, null) is handed to encoding/json
// whole, so the result is always what encoding/json gives, errors
// included.
//
// The list is packed, as it is read: every name in one string, and per
// entry its name's length and three numbers as varints, some 7 bytes
// where a BackendMetrics is 40 (at 50,000 backends, 1.7 MB a scrape for
// the list instead of 3.4). All gives the entries back in order.
type BackendList struct {
	names  string // every name, one after another
	packed []byte // per entry: uvarint len(name), varint endpoints, requests, failures
	n      int
}

// BackendListOf packs backends.
func BackendListOf(backends ...BackendMetrics) BackendList {
	var names strings.Builder
	var l BackendList
	for _, b := range backends {
		names.WriteString(b.Name)
		l.add(len(b.Name), b)
	}
	l.names = names.String()
	return l
}

// add packs b, whose name of nameLen bytes is next in l.names.
func (l *BackendList) add(nameLen int, b BackendMetrics) {
	l.packed = binary.AppendUvarint(l.packed, uint64(nameLen))
	l.packed = binary.AppendVarint(l.packed, int64(b.Endpoints))
	l.packed = binary.AppendVarint(l.packed, b.Requests)
	l.packed = binary.AppendVarint(l.packed, b.Failures)
	l.n++
}

// Len is the number of entries.
func (l BackendList) Len() int { return l.n }

// All yields the entries in order; their names are substrings of one
// string, made without allocating.
func (l BackendList) All() iter.Seq[BackendMetrics] {
	return func(yield func(BackendMetrics) bool) {
		names, packed := l.names, l.packed
		for len(packed) > 0 {
			var b BackendMetrics
			nameLen, k := binary.Uvarint(packed)
			packed = packed[k:]
			endpoints, k := binary.Varint(packed)
			packed = packed[k:]
			b.Requests, k = binary.Varint(packed)
			packed = packed[k:]
			b.Failures, k = binary.Varint(packed)
			packed = packed[k:]
			b.Name, names = names[:nameLen], names[nameLen:]
			b.Endpoints = int(endpoints)
			if !yield(b) {
				return
			}
		}
	}
}

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
	*l = BackendListOf(slow...)
	return nil
}

// backendReader reads the array Lua writes; ok false means "not that
// shape": the caller reads it with encoding/json instead.
type backendReader struct {
	data []byte
	pos  int
	// names holds every name read, one after another.
	names strings.Builder
	// src, when not nil, is the rest of the answer: data is then a window
	// of streamWindow bytes over it, refilled as it is read (refill).
	src io.Reader
	eof bool  // src has ended
	err error // src's error, if not io.EOF
	// hint, for src, is the last answer's size, which bounds the list and
	// its names as len(data) does when data is all there is.
	hint StreamHint
}

// streamWindow is what backendReader holds of an answer it reads from a
// stream: refill keeps half of it ahead of what it reads, more than any
// entry or key and its value that Lua writes (an entry is a Service's
// name and three numbers). A longer one fails as "not that shape".
const streamWindow = 64 << 10

// refill keeps at least streamWindow/2 bytes ahead of r.pos, or what is
// left of src: it is called where a key or an entry starts, so the slices
// of data taken before (a key) are not used after it.
func (r *backendReader) refill() {
	if r.src == nil || r.eof || len(r.data)-r.pos >= streamWindow/2 {
		return
	}
	if r.data == nil {
		r.data = make([]byte, 0, streamWindow)
	}
	n := copy(r.data[:cap(r.data)], r.data[r.pos:])
	r.data, r.pos = r.data[:n], 0
	for len(r.data) < cap(r.data) && !r.eof {
		k, err := r.src.Read(r.data[len(r.data):cap(r.data)])
		r.data = r.data[:len(r.data)+k]
		if err != nil {
			r.eof = true
			if err != io.EOF {
				r.err = err
			}
		}
	}
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
		return BackendList{}, false
	}
	// From a stream, the last answer's sizes, with room for a few more.
	packed, names := r.hint.PackedBytes+r.hint.PackedBytes/64, r.hint.NameBytes+r.hint.NameBytes/64
	if r.src == nil {
		// Every entry is one object: a '{' count is a bound (names may
		// hold more), taken without allocating.
		n := 0
		for _, c := range r.data[r.pos:] {
			if c == '{' {
				n++
			}
		}
		// An entry packs into about 8 bytes. The names are at most what is
		// left once each entry's keys and punctuation are taken out (a
		// guess if an entry lacks a key).
		packed = 8 * n
		names = len(r.data) - r.pos - n*len(`{"name":"","endpoints":,"requests":,"failures":},`)
	}
	list := BackendList{packed: make([]byte, 0, packed)}
	r.names.Grow(max(names, 64))
	mark := r.names.Len()
	r.space()
	if !r.eat(']') {
		for {
			r.refill()
			start := r.names.Len()
			b, err := r.backend()
			// A name given twice (its last is the entry's) is not Lua's.
			if err != nil || r.names.Len()-start != len(b.Name) {
				return BackendList{}, false
			}
			list.add(len(b.Name), b)
			r.space()
			if r.eat(']') {
				break
			}
			if !r.eat(',') {
				return BackendList{}, false
			}
		}
	}
	list.names = r.names.String()[mark:]
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

// backend reads one object; its name is appended to r.names.
func (r *backendReader) backend() (BackendMetrics, error) {
	var b BackendMetrics
	r.space()
	if !r.eat('{') {
		return b, errShape
	}
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
			b.Name, err = r.name()
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
	return b, nil
}

// field reads up to the next key of an object whose '{' is read, and
// returns the key with r.pos at its value; done at the object's '}'; ok
// false if what follows is no key, ',' or '}'. first says it is the
// object's first key (no ',' before it).
func (r *backendReader) field(first bool) (key []byte, done, ok bool) {
	r.refill()
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

// name reads a JSON string, unescaped, appended to r.names. Printable
// ASCII and the \/ Lua writes for every slash are read here; a string with
// any other escape or a byte past ASCII is decoded by encoding/json, which
// also replaces invalid UTF-8 as it would in the slow path.
func (r *backendReader) name() (string, error) {
	if !r.eat('"') {
		return "", errShape
	}
	start := r.pos
	plain := true
	for ; r.pos < len(r.data) && r.data[r.pos] != '"'; r.pos++ {
		switch c := r.data[r.pos]; {
		case c == '\\' && r.pos+1 < len(r.data) && r.data[r.pos+1] == '/':
			r.pos++
		case c == '\\':
			plain = false
			r.pos++ // the escaped byte: a '"' there does not end the string
		case c < 0x20 || c >= utf8.RuneSelf:
			plain = false
		}
	}
	if r.pos >= len(r.data) {
		return "", errShape
	}
	raw := r.data[start:r.pos]
	r.pos++ // the closing quote
	mark := r.names.Len()
	if plain {
		for i := 0; i < len(raw); i++ {
			if raw[i] == '\\' {
				i++ // \/
			}
			r.names.WriteByte(raw[i])
		}
	} else {
		var s string
		if err := json.Unmarshal(r.data[start-1:r.pos], &s); err != nil {
			return "", errShape
		}
		r.names.WriteString(s)
	}
	return r.names.String()[mark:], nil
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
