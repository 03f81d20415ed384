package render

import (
	"fmt"
	"reflect"
	"slices"
)

// What made two configs differ, for the reason of a reload in the sync
// log line. Changes compares the views the template printed, part by
// part, rather than the bytes: it costs nothing until a reload, and it
// names the part. Every field of confView belongs to a part; a field no
// part names (a new one) counts as a global setting, so that no
// difference goes unexplained.

// Reasons a reload gives (besides the profile counts).
const (
	ReasonFirstConfig     = "first config"
	ReasonNginxRestarted  = "nginx restarted"
	ReasonUnknownRunning  = "nginx runs a config the agent did not confirm"
	ReasonListener        = "listener change"
	ReasonServerBlocks    = "server blocks (client certificates)"
	ReasonGatewayServers  = "Gateway listeners"
	ReasonGatewayRetries  = "Gateway retry locations"
	ReasonGlobal          = "ConfigMap/global setting"
	ReasonRateLimits      = "rate-limit zones"
	ReasonErrorLocations  = "custom error locations"
	ReasonAuthLocations   = "external auth locations"
	ReasonTLSUpstreams    = "backend TLS upstreams"
	ReasonCertificateFile = "certificate file"
	ReasonBodySize        = "largest client body size"
	ReasonTemplate        = "nginx.conf template"
)

// viewParts names the part each field of confView belongs to; the
// profiles are compared by name, and the fields the profiles make
// (Mirror, Dollar) change only with them.
var viewParts = map[string]string{
	"APIListen": ReasonListener, "HTTPListen": ReasonListener, "HTTPSListen": ReasonListener,
	"StatusListen": ReasonListener, "Stream": ReasonListener,
	"GatewayServers":    ReasonGatewayServers,
	"GatewayRetries":    ReasonGatewayRetries,
	"GatewayBackendTLS": ReasonGatewayServers,
	"ClientTLSServers":  ReasonServerBlocks, "DefaultServerNames": ReasonServerBlocks,
	"ServerNamesHashBucketSize": ReasonServerBlocks, "ServerNamesHashMaxSize": ReasonServerBlocks,
	"Access":        ReasonRateLimits,
	"AccessErrors":  ReasonErrorLocations,
	"AuthLocations": ReasonAuthLocations, "SigninLocations": ReasonAuthLocations, "AuthCache": ReasonAuthLocations,
	"TLSUpstreams":   ReasonTLSUpstreams,
	"RouterBodySize": ReasonBodySize,
	"ConfigHash":     "", "Profiles": "", "Mirror": "", "Dollar": "",
}

// Changes says what differs between the config from (the one nginx runs)
// and to, in a fixed order: the profiles added and retired, the
// certificate files, then each part of the rest. Both must come from
// Render or Build; a config of unknown parts (the zero Config) gives
// ReasonUnknownRunning. It returns nil when the hashes are equal.
func Changes(from, to Config) []string {
	if from.Hash == to.Hash {
		return nil
	}
	if from.view == nil || to.view == nil {
		return []string{ReasonUnknownRunning}
	}
	var reasons []string
	added, retired := profileChanges(from.Profiles, to.Profiles)
	if added > 0 {
		reasons = append(reasons, count(added, "new profile", "new profiles"))
	}
	if retired > 0 {
		reasons = append(reasons, count(retired, "profile retired", "profiles retired"))
	}
	if !slices.Equal(from.Files, to.Files) {
		reasons = append(reasons, ReasonCertificateFile)
	}
	a, b := reflect.ValueOf(*from.view), reflect.ValueOf(*to.view)
	t := a.Type()
	for i := range t.NumField() {
		field := t.Field(i)
		if !field.IsExported() {
			continue // the template cannot print it
		}
		part, named := viewParts[field.Name]
		if !named {
			part = ReasonGlobal
		}
		if part == "" || slices.Contains(reasons, part) {
			continue
		}
		if !reflect.DeepEqual(a.Field(i).Interface(), b.Field(i).Interface()) {
			reasons = append(reasons, part)
		}
	}
	if len(reasons) == 0 {
		// Same views, other bytes: the agent was upgraded.
		reasons = append(reasons, ReasonTemplate)
	}
	return reasons
}

// profileChanges counts the profiles of to that from lacks, and those of
// from that to lacks, by name (a name is the hash of the body).
func profileChanges(from, to []Profile) (added, retired int) {
	names := make(map[string]bool, len(from))
	for _, p := range from {
		names[p.Name] = true
	}
	for _, p := range to {
		if !names[p.Name] {
			added++
		}
		delete(names, p.Name)
	}
	return added, len(names)
}

func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
