package configmap

import (
	"slices"
	"testing"

	"github.com/restysync/restysync/agent/internal/render"
)

// A key Apply does not read says which of three it is: an ingress-nginx
// key restysync does not support yet, a typo of a known key (with the key
// meant), or a key ingress-nginx does not read either.
func TestUnreadKeys(t *testing.T) {
	res := Apply(render.Settings{}, "ns", "cm", map[string]string{
		"ssl-redirect": "false", "enable-real-ip": "true", "log-format-stream": "true",
		"use-gzipp": "true", "keep-alve": "30", "my-own-setting": "x",
	})
	want := map[string]Key{
		"ssl-redirect":      {Key: "ssl-redirect", Status: StatusUnknown, Reason: reasonNotSupportedYet},
		"enable-real-ip":    {Key: "enable-real-ip", Status: StatusUnknown, Reason: reasonNotSupportedYet},
		"log-format-stream": {Key: "log-format-stream", Status: StatusUnknown, Reason: reasonNotSupportedYet},
		"use-gzipp": {Key: "use-gzipp", Status: StatusTypo, Suggestion: "use-gzip",
			Reason: "not an ingress-nginx key; a typo of use-gzip?; it is ignored"},
		"keep-alve": {Key: "keep-alve", Status: StatusTypo, Suggestion: "keep-alive",
			Reason: "not an ingress-nginx key; a typo of keep-alive?; it is ignored"},
		"my-own-setting": {Key: "my-own-setting", Status: StatusIgnoredByIngressNginx, Reason: reasonNotIngressNginx},
	}
	for _, k := range res.Keys {
		if k != want[k.Key] {
			t.Errorf("%s: %+v, want %+v", k.Key, k, want[k.Key])
		}
	}
	if len(res.Keys) != len(want) || len(res.Problems) != len(want) {
		t.Errorf("keys %v, problems %v: want one of each per key", res.Keys, res.Problems)
	}
}

// notSupportedYet is sorted (unreadKey searches it) and holds no key Apply
// reads: a key restysync comes to read leaves the list.
func TestNotSupportedYetApart(t *testing.T) {
	if !slices.IsSorted(notSupportedYet) || len(slices.Compact(slices.Clone(notSupportedYet))) != len(notSupportedYet) {
		t.Fatal("notSupportedYet is not sorted, or has a key twice")
	}
	for _, key := range notSupportedYet {
		res := Apply(render.Settings{}, "ns", "cm", map[string]string{key: "x"})
		if k := res.Keys[0]; k.Status != StatusUnknown {
			t.Errorf("%s is in notSupportedYet but Apply says %s: take it out of the list", key, k.Status)
		}
	}
	read := append(append(SupportedKeys(), GlobalAuthKeys...), snippetKeys...)
	for _, key := range read {
		if _, found := slices.BinarySearch(notSupportedYet, key); found {
			t.Errorf("%s is read, and in notSupportedYet", key)
		}
	}
}
