package syncer

import (
	"log/slog"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/plan"
	"github.com/restysync/restysync/agent/internal/render"
	"github.com/restysync/restysync/agent/internal/source"
)

// The ConfigMap reaches the render settings and the backends' Policy: a
// change of load-balance alone keeps the config's bytes (a push, no
// reload); a change of an nginx setting renders other bytes; a bad value
// is a Problem and the rest applies; an unchanged ConfigMap is not read
// again.
func TestConfigMapSettings(t *testing.T) {
	src := &fakeSource{snap: oneIngressSnapshot("10.0.0.1")}
	settings := render.Settings{SharedDir: t.TempDir(), HTTPPort: 8080, HTTPSPort: 8443}
	s := New(src, nil, Options{IngressClass: "restysync", Render: settings, ConfigMap: "ingress/restysync"}, slog.New(slog.DiscardHandler))
	withData := func(data map[string]string) {
		snap := oneIngressSnapshot("10.0.0.1")
		snap.ConfigMap = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ingress", Name: "restysync"}, Data: data}
		src.snap = snap
	}
	type built struct {
		m        model.Model
		problems []model.Problem
		cfg      render.Config
	}
	sync := func() built {
		t.Helper()
		m, problems, path := s.model(map[source.Kind]bool{source.KindConfigMap: true})
		if path != "full" {
			t.Fatalf("path %s, want full", path)
		}
		cfg, _, _, err := s.configFor(m)
		if err != nil {
			t.Fatal(err)
		}
		return built{m, problems, cfg}
	}

	missing := sync()
	if len(missing.problems) != 1 || missing.problems[0].Kind != "ConfigMap" {
		t.Errorf("a missing ConfigMap: problems %v, want one", missing.problems)
	}

	withData(map[string]string{"server-tokens": "false"})
	base := sync()
	if len(base.problems) != 0 {
		t.Fatalf("problems %v", base.problems)
	}
	if base.cfg.Hash != missing.cfg.Hash {
		t.Error("server-tokens false (the default) changed nginx.conf")
	}

	withData(map[string]string{"server-tokens": "false", "load-balance": "ewma"})
	ewma := sync()
	if ewma.cfg.Hash != base.cfg.Hash {
		t.Error("load-balance changed nginx.conf: it must be a push, not a reload")
	}
	if got := ewma.m.Backends.At(0).PolicyValue().Algorithm; got != model.AlgorithmEWMA {
		t.Errorf("backend algorithm %q, want ewma", got)
	}
	held := plan.Held{ConfigHash: base.cfg.Hash, Backends: []model.Backend{base.m.Backends.At(0)}}
	p := plan.Compute(held, plan.Next{Config: ewma.cfg, Backends: ewma.m.Backends})
	if push, ok := p.Step(plan.PushBackends); len(p.Steps) != 1 || !ok || len(push.Backends) != 1 {
		t.Errorf("plan %+v, want one upsert and no reload", p)
	}

	withData(map[string]string{"server-tokens": "true", "load-balance": "ewma", "gzip-level": "99", "surprise": "1"})
	tokens := sync()
	if tokens.cfg.Hash == ewma.cfg.Hash {
		t.Error("server-tokens true did not change nginx.conf")
	}
	if len(tokens.problems) != 2 {
		t.Errorf("problems %v, want gzip-level and surprise", tokens.problems)
	}
	again := sync()
	if !slices.Equal(again.problems, tokens.problems) || again.cfg.Hash != tokens.cfg.Hash {
		t.Error("the same ConfigMap gave other problems or another config")
	}
	if settings := s.configMap.Settings(); settings.HTTP == nil || !settings.HTTP.ServerTokens {
		t.Errorf("settings %+v", settings)
	}
}
