package render

// Reading back. An agent that restarts finds nginx running a config an
// earlier agent rendered, and must know its profiles to keep them for one
// more config while Lua's routes still jump to them (apply.ConfigRecord's
// Keep): a missing named location is a 500. The nginx.conf in the shared
// dir is that config when its hash is the one nginx reports, and a profile
// reads back from it exactly: a profile's name is the hash of its body, so
// a body read wrong cannot pass for it.

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"

	"github.com/restysync/restysync/agent/internal/model"
)

// ReadBack returns the Config render made of conf, the bytes of an
// nginx.conf, if its hash is hash: its bytes, hash, profiles and files.
func ReadBack(conf []byte, hash string) (Config, error) {
	if len(hash) != 2*sha256.Size || bytes.Count(conf, []byte(hash)) != 1 {
		return Config{}, fmt.Errorf("nginx.conf does not hold the config hash %.12s once", hash)
	}
	blank := bytes.Replace(conf, []byte(hash), []byte(hashPlaceholder), 1)
	sum := sha256.Sum256(blank)
	if hex.EncodeToString(sum[:]) != hash {
		return Config{}, fmt.Errorf("nginx.conf is not the config %.12s (another config, or edited)", hash)
	}
	profiles, err := readProfiles(conf)
	if err != nil {
		return Config{}, err
	}
	var names []string
	for _, m := range backendTLSLocation.FindAllSubmatch(conf, -1) {
		names = append(names, string(m[1]))
	}
	slices.Sort(names)
	return Config{Bytes: conf, Hash: hash, Profiles: profiles, Files: profileFiles(profiles), BackendTLS: slices.Compact(names)}, nil
}

// backendTLSLocation finds the backend TLS locations of the Gateway
// servers (gateway.go).
var backendTLSLocation = regexp.MustCompile(`\n        location (` + model.BackendTLSPrefix + `[0-9a-f]{24}) \{`)

// profileHead is how the template opens a profile's named location, up to
// its name.
const profileHead = "\n        location " + profilePrefix

// profileEnd closes the named location.
const profileEnd = "\n        }"

// readProfiles returns the profiles of conf, in the order they appear
// (sorted by name, as render writes them). The body of each is the text
// between its guard and the first closing line after which the body
// hashes to the name.
func readProfiles(conf []byte) ([]Profile, error) {
	var out []Profile
	rest := conf
	for {
		i := bytes.Index(rest, []byte(profileHead))
		if i < 0 {
			return out, nil
		}
		rest = rest[i+len(profileHead)-len(profilePrefix):]
		name, _, ok := bytes.Cut(rest, []byte(" {"))
		if !ok || !profileName.Match(name) {
			return nil, fmt.Errorf("nginx.conf: a profile's location has no name render gives")
		}
		guard := fmt.Sprintf(" {\n            if ($restysync_profile != \"%s\") {\n                return 404;\n            }", name)
		if !bytes.HasPrefix(rest[len(name):], []byte(guard)) {
			return nil, fmt.Errorf("nginx.conf: profile %s has no guard render gives", name)
		}
		rest = rest[len(name)+len(guard):]
		body, found := "", false
		for end := 0; ; {
			j := bytes.Index(rest[end:], []byte(profileEnd))
			if j < 0 {
				break
			}
			end += j
			if hashName(profilePrefix, string(rest[:end])) == string(name) {
				body, found = string(rest[:end]), true
				break
			}
			end += len(profileEnd)
		}
		if !found {
			return nil, fmt.Errorf("nginx.conf: no body of profile %s hashes to its name", name)
		}
		out = append(out, Profile{Name: string(name), Body: body})
		rest = rest[len(body)+len(profileEnd):]
	}
}
