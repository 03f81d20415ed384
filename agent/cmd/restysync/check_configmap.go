package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	corev1 "k8s.io/api/core/v1"

	"github.com/restysync/restysync/agent/internal/configmap"
	"github.com/restysync/restysync/agent/internal/render"
)

// CheckedConfigMap lists the keys of the ConfigMap check was given and
// what restysync does with each.
type CheckedConfigMap struct {
	ConfigMap string `json:"configMap"` // namespace/name
	Found     bool   `json:"found"`
	// Keys sorted; Status is supported, invalid, refused, unknown (an
	// ingress-nginx key restysync does not support yet), typo (with a
	// suggestion) or ignored-by-ingress-nginx (not an ingress-nginx key).
	Keys    []configmap.Key `json:"keys"`
	Summary CheckKeySummary `json:"summary"`
}

// CheckKeySummary counts the ConfigMap's keys by status.
type CheckKeySummary struct {
	Supported             int `json:"supported"`
	Invalid               int `json:"invalid"`
	Refused               int `json:"refused"`
	Unknown               int `json:"unknown"`
	Typo                  int `json:"typo"`
	IgnoredByIngressNginx int `json:"ignored_by_ingress_nginx"`
}

// checkConfigMap classifies the keys of cm, the ConfigMap name (nil when it
// does not exist), as the agent would apply them.
func checkConfigMap(name string, cm *corev1.ConfigMap) *CheckedConfigMap {
	out := &CheckedConfigMap{ConfigMap: name, Found: cm != nil, Keys: []configmap.Key{}}
	if cm == nil {
		return out
	}
	res := configmap.Apply(render.Settings{}, cm.Namespace, cm.Name, cm.Data)
	out.Keys = res.Keys
	// Where global-auth-url points is the model's check, as the agent
	// in a cluster makes it (checkTargets).
	if res.GlobalAuth.URL != "" {
		if reason := checkTargets.CheckURL(res.GlobalAuth.URL, true); reason != "" {
			for i, k := range out.Keys {
				if k.Key == "global-auth-url" {
					out.Keys[i] = configmap.Key{Key: k.Key, Status: configmap.StatusRefused,
						Reason: fmt.Sprintf("%q %s", res.GlobalAuth.URL, reason)}
				}
			}
		}
	}
	for _, k := range res.Keys {
		switch k.Status {
		case configmap.StatusSupported:
			out.Summary.Supported++
		case configmap.StatusInvalid:
			out.Summary.Invalid++
		case configmap.StatusRefused:
			out.Summary.Refused++
		case configmap.StatusTypo:
			out.Summary.Typo++
		case configmap.StatusIgnoredByIngressNginx:
			out.Summary.IgnoredByIngressNginx++
		default:
			out.Summary.Unknown++
		}
	}
	return out
}

// failure says why the ConfigMap fails the check, "" when it passes: it
// does not exist, or a key is not supported as written; with strict, a key
// does nothing under either controller (typo, ignored-by-ingress-nginx).
func (c *CheckedConfigMap) failure(strict bool) string {
	if !c.Found {
		return "not found"
	}
	s := c.Summary
	return strings.Join(statusFailures("keys", s.Invalid, s.Refused, s.Unknown, s.Typo, s.IgnoredByIngressNginx, strict), ", ")
}

func writeCheckConfigMap(w io.Writer, c *CheckedConfigMap) {
	if c == nil {
		return
	}
	fmt.Fprintf(w, "\nConfigMap %s\n", c.ConfigMap)
	if !c.Found {
		fmt.Fprintln(w, "  not found")
		return
	}
	s := c.Summary
	fmt.Fprintf(w, "  keys: %d supported, %d invalid, %d refused, %d unknown, %d typo, %d ignored-by-ingress-nginx\n",
		s.Supported, s.Invalid, s.Refused, s.Unknown, s.Typo, s.IgnoredByIngressNginx)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, k := range c.Keys {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", k.Key, k.Status, strings.TrimSpace(k.Reason))
	}
	tw.Flush()
}
