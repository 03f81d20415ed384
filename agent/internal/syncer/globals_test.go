package syncer

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/restysync/restysync/agent/internal/apply"
	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/render"
	"github.com/restysync/restysync/agent/internal/source"
)

// globalsLoop steps a Syncer through full builds as the loop does, with a
// stand-in for nginx: it refuses a config whose access log is
// logs/blocked (a folder, for nginx: a value only nginx can judge) or
// whose model serves bad.test.
type globalsLoop struct {
	t       *testing.T
	s       *Syncer
	src     *fakeSource
	reloads int
}

func newGlobalsLoop(t *testing.T) *globalsLoop {
	settings := render.Settings{SharedDir: t.TempDir(), HTTPPort: 8080, HTTPSPort: 8443}
	src := &fakeSource{snap: oneIngressSnapshot("10.0.0.1")}
	s := New(src, nil, Options{IngressClass: "restysync", Render: settings, ConfigMap: "ingress/restysync"}, slog.New(slog.DiscardHandler))
	return &globalsLoop{t: t, s: s, src: src}
}

// set makes the source hold the Ingresses of hosts (besides web.test) and
// the ConfigMap with data.
func (l *globalsLoop) set(data map[string]string, hosts ...string) {
	snap := oneIngressSnapshot("10.0.0.1")
	for _, host := range hosts {
		snap.Ingresses = model.ListOf(append(snap.Ingresses.Slice(), hostIngress(strings.TrimSuffix(host, ".test"), host))...)
	}
	snap.ConfigMap = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ingress", Name: "restysync"}, Data: data}
	l.src.snap = snap
}

func (l *globalsLoop) takes(m model.Model, cfg render.Config) bool {
	if bytes.Contains(cfg.Bytes, []byte("logs/blocked")) {
		return false
	}
	return !slices.ContainsFunc(m.Servers.Slice(), func(srv *model.Server) bool { return srv.Host == "bad.test" })
}

// settle runs full builds and reloads until one is taken and nothing more
// is to be tried; it returns the last model, its problems and config.
func (l *globalsLoop) settle() (model.Model, []model.Problem, render.Config) {
	l.t.Helper()
	for range 20 {
		m, problems, _ := l.s.model(map[source.Kind]bool{source.KindIngress: true})
		cfg, _, _, err := l.s.configFor(m)
		if errors.Is(err, errRender) {
			// As sync: isolate, then build again.
			if l.s.isolateRenderFailure(err) {
				continue
			}
			select {
			case <-l.s.dirty:
				continue
			default:
				l.t.Fatalf("render failed and nothing more is tried: %v", err)
			}
		}
		if err != nil {
			l.t.Fatal(err)
		}
		l.reloads++
		var verdict error
		if !l.takes(m, cfg) {
			verdict = fmt.Errorf("%w; nginx said: [emerg] open() failed", apply.ErrRejected)
		}
		problems = append(problems, l.s.judge(syncResult{Result: apply.Result{ConfigRunning: verdict == nil}}, verdict)...)
		select {
		case <-l.s.dirty: // another step is due
			continue
		default:
		}
		if verdict == nil {
			return m, problems, cfg
		}
		l.t.Fatal("nginx refused the config and nothing more is tried")
	}
	l.t.Fatal("the loop does not settle")
	return model.Model{}, nil, render.Config{}
}

func hostsOf(m model.Model) []string {
	var out []string
	for srv := range m.Servers.All() {
		out = append(out, srv.Host)
	}
	return out
}

func configMapRefusal(problems []model.Problem) string {
	for _, p := range problems {
		if p.Kind == "ConfigMap" && strings.Contains(p.Reason, "nginx rejected") {
			return p.Reason
		}
	}
	return ""
}

// A ConfigMap nginx refuses, changed while Ingresses change too, is
// blamed, not the Ingresses: the globals nginx took are put back, the
// ConfigMap has a Problem, no Ingress is quarantined, and Ingress changes
// keep applying; once the ConfigMap is fixed, it applies.
func TestConfigMapNginxRefusesIsBlamed(t *testing.T) {
	l := newGlobalsLoop(t)
	l.set(map[string]string{})
	l.settle()

	// The ConfigMap turns bad while tenant A adds an Ingress.
	l.reloads = 0
	l.set(map[string]string{"enable-access-log": "true", "access-log-path": "logs/blocked"}, "a2.test")
	m, problems, cfg := l.settle()
	if q := l.s.guard.Keys(); len(q) != 0 {
		t.Errorf("quarantined %v for the ConfigMap's fault", q)
	}
	if got := hostsOf(m); !slices.Equal(got, []string{"a2.test", "web.test"}) {
		t.Errorf("hosts %v, want A's new Ingress served on the good ConfigMap", got)
	}
	if bytes.Contains(cfg.Bytes, []byte("logs/blocked")) {
		t.Error("the config nginx runs holds the refused ConfigMap")
	}
	if reason := configMapRefusal(problems); !strings.Contains(reason, "[emerg] open() failed") {
		t.Errorf("ConfigMap problem %q: want nginx's reason", reason)
	}
	if l.s.configMap.Refused() == "" {
		t.Error("the state does not say nginx refuses the ConfigMap")
	}
	// The refused config, the trial of the old Ingresses with the new
	// ConfigMap, then the new Ingresses on the old ConfigMap.
	if l.reloads != 3 {
		t.Errorf("%d reloads to blame the ConfigMap, want 3", l.reloads)
	}

	// While it is refused, Ingress changes apply on the good ConfigMap.
	l.set(map[string]string{"enable-access-log": "true", "access-log-path": "logs/blocked"}, "a2.test", "a3.test")
	m, problems, _ = l.settle()
	if got := hostsOf(m); !slices.Equal(got, []string{"a2.test", "a3.test", "web.test"}) {
		t.Errorf("hosts %v while the ConfigMap is refused", got)
	}
	if configMapRefusal(problems) == "" {
		t.Error("the ConfigMap's Problem went while it is unchanged")
	}

	// Fixed, the ConfigMap applies and nobody stays blamed.
	l.set(map[string]string{"enable-access-log": "true", "access-log-path": "logs/fixed.log"}, "a2.test", "a3.test")
	m, problems, cfg = l.settle()
	if !bytes.Contains(cfg.Bytes, []byte("logs/fixed.log")) {
		t.Error("the fixed ConfigMap is not applied")
	}
	if configMapRefusal(problems) != "" || l.s.configMap.Refused() != "" {
		t.Error("the fixed ConfigMap is still blamed")
	}
	if q := l.s.guard.Keys(); len(q) != 0 || len(hostsOf(m)) != 3 {
		t.Errorf("after the fix: quarantined %v, hosts %v", q, hostsOf(m))
	}
}

// When the ConfigMap changed but nginx takes it with the old Ingresses, the
// changed Ingress is to blame and quarantined; an Ingress that fails with
// an unchanged ConfigMap is quarantined at once.
func TestIngressBlamedWhenTheConfigMapIsGood(t *testing.T) {
	l := newGlobalsLoop(t)
	l.set(map[string]string{})
	l.settle()

	l.set(map[string]string{"server-tokens": "true"}, "bad.test")
	m, problems, cfg := l.settle()
	if q := l.s.guard.Keys(); !slices.Equal(q, []string{"default/bad"}) {
		t.Errorf("quarantined %v, want [default/bad]", q)
	}
	if configMapRefusal(problems) != "" || l.s.configMap.Refused() != "" {
		t.Error("the good ConfigMap is blamed")
	}
	if !bytes.Contains(cfg.Bytes, []byte("server_tokens on")) || !slices.Equal(hostsOf(m), []string{"web.test"}) {
		t.Errorf("hosts %v; want the new ConfigMap applied without bad.test", hostsOf(m))
	}

	// The ConfigMap unchanged, a new bad Ingress is blamed at once.
	l.reloads = 0
	l.set(map[string]string{"server-tokens": "true"}, "bad.test")
	l.src.snap.Ingresses = model.ListOf(append(l.src.snap.Ingresses.Slice(), hostIngress("bad2", "bad.test"))...)
	l.settle()
	if q := l.s.guard.Keys(); !slices.Equal(q, []string{"default/bad", "default/bad2"}) {
		t.Errorf("quarantined %v, want default/bad and default/bad2", q)
	}
	if l.reloads != 2 {
		t.Errorf("%d reloads, want 2: the refused config and the one without bad2", l.reloads)
	}
}

// A ConfigMap render refuses with the Ingresses nginx took is blamed the
// same way: its last good version renders, with the Ingress changes.
func TestConfigMapRenderRefusesIsBlamed(t *testing.T) {
	renderRefuses = func(_ model.Model, s render.Settings) error {
		if s.HTTP != nil && s.HTTP.AccessLogPath == "logs/unrenderable" {
			return errors.New("access log path: refused by the test")
		}
		return nil
	}
	t.Cleanup(func() { renderRefuses = nil })
	l := newGlobalsLoop(t)
	l.set(map[string]string{})
	l.settle()

	l.set(map[string]string{"enable-access-log": "true", "access-log-path": "logs/unrenderable"}, "a2.test")
	m, problems, _ := l.settle()
	if q := l.s.guard.Keys(); len(q) != 0 {
		t.Errorf("quarantined %v for the ConfigMap's fault", q)
	}
	if got := hostsOf(m); !slices.Equal(got, []string{"a2.test", "web.test"}) {
		t.Errorf("hosts %v, want A's new Ingress served on the good ConfigMap", got)
	}
	reason := ""
	for _, p := range problems {
		if p.Kind == "ConfigMap" {
			reason = p.Reason
		}
	}
	if !strings.Contains(reason, "the agent cannot render nginx.conf") || !strings.Contains(reason, "refused by the test") {
		t.Errorf("ConfigMap problem %q: want render's refusal", reason)
	}
	if !strings.Contains(l.s.configMap.Refused(), "refused by the test") {
		t.Errorf("state: %q", l.s.configMap.Refused())
	}
}

// An agent that starts with a ConfigMap nginx refuses (nginx runs an older
// agent's config, or the bootstrap) blames the ConfigMap, not every
// Ingress: the flags' settings are the good globals before any config was
// confirmed.
func TestConfigMapNginxRefusesAtStart(t *testing.T) {
	l := newGlobalsLoop(t)
	l.set(map[string]string{"enable-access-log": "true", "access-log-path": "logs/blocked"}, "a2.test")
	m, problems, cfg := l.settle()
	if q := l.s.guard.Keys(); len(q) != 0 {
		t.Errorf("quarantined %v for the ConfigMap's fault", q)
	}
	if got := hostsOf(m); !slices.Equal(got, []string{"a2.test", "web.test"}) {
		t.Errorf("hosts %v, want every Ingress served on the flags' settings", got)
	}
	if configMapRefusal(problems) == "" || bytes.Contains(cfg.Bytes, []byte("logs/blocked")) {
		t.Error("the ConfigMap is not blamed")
	}
	if l.reloads != 3 {
		t.Errorf("%d reloads, want 3: all, none with the ConfigMap, all without it", l.reloads)
	}
}
