package e2e

import (
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A bad save of a manifest does not take its objects offline: the file
// source keeps the last good version of what the broken document defined,
// as the API server refuses a bad write, and reports a Problem that names
// the file and the line. Fixing the file applies the new version.
func TestFolderKeepsLastGoodVersion(t *testing.T) {
	b := startBackends(t, ipRR1, ipRR2)
	svc, slice, ok := strings.Cut(service("rr", b.port, ep(ipRR1)), "---\n")
	if !ok {
		t.Fatal("service() returned no EndpointSlice")
	}
	s := newStack(t, map[string]string{
		"classes.yaml":       ingressClasses,
		"service.yaml":       svc,
		"endpointslice.yaml": slice,
		"ingress.yaml":       ingress("rr", ingressOpts{class: "restysync", host: "rr.test", paths: []path{prefix("/", "rr")}}),
	})
	s.eventually("served", func() error { return s.expect("rr.test", "/", ipRR1) })
	sliceFile := s.manifests + "/endpointslice.yaml"

	l := startLoad(s, "rr.test", ipRR1)
	stopped := false
	defer func() {
		if !stopped {
			l.stop()
		}
	}()

	// inspect asks the running agent, as a user would.
	inspect := func() string {
		out, err := exec.Command(agentBinary, "inspect", "--admin", s.admin).CombinedOutput()
		if err != nil {
			t.Fatalf("restysync inspect: %v\n%s", err, out)
		}
		return string(out)
	}
	problemLine := func(out string) string {
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, "File "+sliceFile+"#1: ") {
				return strings.TrimSpace(line)
			}
		}
		return ""
	}

	t.Run("invalid YAML", func(t *testing.T) {
		broken := strings.Replace(slice, `addresses: ["`+ipRR1+`"]`, `addresses: ["`+ipRR1+`"`, 1)
		s.writeFile("endpointslice.yaml", broken)
		var line string
		s.eventually("inspect reports the broken file", func() error {
			if line = problemLine(inspect()); line == "" {
				return errorf("no Problem for %s", sliceFile)
			}
			return nil
		})
		t.Logf("inspect: %s", line)
		if !regexp.MustCompile(`yaml: line \d+: `).MatchString(line) ||
			!strings.Contains(line, "the last good version of EndpointSlice default/rr-1 is kept") {
			t.Errorf("the Problem does not name the line and what is kept: %s", line)
		}
	})

	t.Run("unknown field", func(t *testing.T) {
		broken := strings.Replace(slice, "addresses:", "adresses:", 1)
		s.writeFile("endpointslice.yaml", broken)
		want := "line " + strconv.Itoa(lineNumber(broken, "adresses:")) + `: strict decoding error: unknown field "endpoints[0].adresses"`
		var line string
		s.eventually("inspect reports the unknown field", func() error {
			if line = problemLine(inspect()); !strings.Contains(line, want) {
				return errorf("Problem %q, want %q", line, want)
			}
			return nil
		})
		t.Logf("inspect: %s", line)
		if !strings.Contains(s.agent.log.String(), "adresses") {
			t.Errorf("the agent log does not report the unknown field")
		}
	})

	time.Sleep(200 * time.Millisecond) // more traffic on the kept version
	requests, failures := l.stop()
	stopped = true
	t.Logf("during the bad saves: %d requests, %d failed", requests, failures)
	if requests == 0 || failures != 0 {
		t.Errorf("%d of %d requests failed while endpointslice.yaml was broken, want none", failures, requests)
	}

	t.Run("fixed: the new version applies", func(t *testing.T) {
		s.writeFile("endpointslice.yaml", strings.Replace(slice, ipRR1, ipRR2, 1))
		s.eventually("the fixed slice serves", func() error { return s.expect("rr.test", "/", ipRR2) })
		s.eventually("the Problem is gone", func() error {
			if line := problemLine(inspect()); line != "" {
				return errorf("still reported: %s", line)
			}
			return nil
		})
	})
}

// lineNumber returns the 1-based line of text that holds fragment, or 0.
func lineNumber(text, fragment string) int {
	for i, line := range strings.Split(text, "\n") {
		if strings.Contains(line, fragment) {
			return i + 1
		}
	}
	return 0
}
