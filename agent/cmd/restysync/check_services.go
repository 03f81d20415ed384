package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	corev1 "k8s.io/api/core/v1"

	"github.com/restysync/restysync/agent/internal/model"
)

// CheckedServices lists the entries of a TCP or UDP services ConfigMap
// (--tcp-services-configmap, --udp-services-configmap) and what restysync
// does with each.
type CheckedServices struct {
	ConfigMap string `json:"configMap"` // namespace/name
	Protocol  string `json:"protocol"`  // TCP or UDP
	Found     bool   `json:"found"`
	// Entries sorted by key; Status is supported, invalid or
	// missing-object (the Service it names is not in the source).
	Entries []CheckedServiceEntry `json:"entries"`
}

// CheckedServiceEntry is one port of a services ConfigMap.
type CheckedServiceEntry struct {
	Port   string `json:"port"`
	Value  string `json:"value"`
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
}

// checkServices classifies the entries of cm (nil when it does not exist)
// by the problems Build raised about them.
func checkServices(name string, protocol corev1.Protocol, cm *corev1.ConfigMap, problems []model.Problem) *CheckedServices {
	out := &CheckedServices{ConfigMap: name, Protocol: string(protocol), Found: cm != nil, Entries: []CheckedServiceEntry{}}
	if cm == nil {
		return out
	}
	for _, key := range slices.Sorted(maps.Keys(cm.Data)) {
		e := CheckedServiceEntry{Port: key, Value: cm.Data[key], Status: model.AnnotationSupported}
		prefix := fmt.Sprintf("%s service %q", protocol, key)
		for _, p := range problems {
			if p.Kind != "ConfigMap" || p.Namespace != cm.Namespace || p.Name != cm.Name || !strings.HasPrefix(p.Reason, prefix) {
				continue
			}
			e.Status, e.Reason = annotationInvalid, strings.TrimLeft(strings.TrimPrefix(p.Reason, prefix), ": ")
			if p.Missing != "" {
				e.Status = annotationMissingObject
			}
			break
		}
		out.Entries = append(out.Entries, e)
	}
	return out
}

// failure says why the ConfigMap does not move as it is, or "".
func (c *CheckedServices) failure() string {
	if !c.Found {
		return "not found"
	}
	invalid := 0
	for _, e := range c.Entries {
		if e.Status == annotationInvalid {
			invalid++
		}
	}
	if invalid > 0 {
		return fmt.Sprintf("%d entries are invalid", invalid)
	}
	return ""
}

func writeCheckServices(w io.Writer, c *CheckedServices) {
	if c == nil {
		return
	}
	fmt.Fprintf(w, "\n%s services ConfigMap %s\n", c.Protocol, c.ConfigMap)
	if !c.Found {
		fmt.Fprintln(w, "  not found")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, e := range c.Entries {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", e.Port, e.Value, e.Status, e.Reason)
	}
	tw.Flush()
}
