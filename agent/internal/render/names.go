package render

// Every Ingress shares one http block and one server block, so the objects
// render makes for a setting are shared by every Ingress that has it:
// profiles, auth and sign-in locations, custom-error locations, upstream
// blocks of backend TLS settings, limit zones and their keys. Each is
// named by a hash of what it holds (hashName), which gives the same name
// in every render and lets a new Ingress reuse what nginx runs.
//
// A name is the object's identity, so it is 128 bits: finding settings of
// one's own that take the name of another tenant's object (and with it,
// its profile without auth, its zone, its TLS connections) is a second
// preimage, 2^128 work, where 48 bits are hours on one GPU. Two different
// objects under one name (two settings of one's own that collide, 2^64
// work) are an internal error of the render (nameTable) that names both
// locations, never one object served silently for the other.

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/restysync/restysync/agent/internal/model"
)

// nameDigits is how many hex digits of the hash a name holds: 128 bits.
const nameDigits = 32

// hashName returns prefix followed by the hash of prefix and parts: what
// names every shared object of nginx.conf.
func hashName(prefix string, parts ...string) string {
	return prefix + nameDigest(append([]string{prefix}, parts...))
}

// nameDigest is hashName's hash, the first nameDigits hex digits of the
// SHA-256 of the parts, each after its length (no two lists of parts give
// the same input). A variable so that a test can make names collide.
var nameDigest = func(parts []string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(strconv.Itoa(len(p)) + ":"))
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil))[:nameDigits]
}

// nameTable holds the shared objects of one kind that a render declares:
// each name, what the object holds and whose it was first.
type nameTable map[string]namedObject

type namedObject struct{ content, owner string }

// claim records that name is object's (a view, printed with %+v, or a
// body), for owner (the location it is made for). It reports whether the
// name is new, so that the object is declared once; a name that another
// object holds already is an error that names both owners, as nginx
// cannot serve both objects under it.
func (t nameTable) claim(name string, object any, owner string) (bool, error) {
	content := fmt.Sprintf("%+v", object)
	held, ok := t[name]
	if !ok {
		t[name] = namedObject{content: content, owner: owner}
		return true, nil
	}
	if held.content != content {
		return false, fmt.Errorf("internal error: %s and %s: two different objects are named %s (a hash collision)", held.owner, owner, name)
	}
	return false, nil
}

// declare returns objects with object appended when its name is new in t.
func declare[T any](t nameTable, objects []T, name string, object T, owner string) ([]T, error) {
	isNew, err := t.claim(name, object, owner)
	if err != nil || !isNew {
		return objects, err
	}
	return append(objects, object), nil
}

// ownerOf names loc for an error.
func ownerOf(loc *model.Location) string {
	return fmt.Sprintf("path %q of %s", loc.Path, loc.Ingress)
}
