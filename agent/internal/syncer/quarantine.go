package syncer

import (
	"maps"
	"slices"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/restysync/restysync/agent/internal/model"
)

// guard keeps one bad Ingress from blocking the others.
//
// nginx is the judge of a config, and it can refuse one the model accepted
// (a regex that RE2 takes and PCRE does not). When it does, the guard finds
// the Ingresses to blame with nginx itself: each step of the loop reloads a
// candidate made of the Ingresses of the last config nginx took plus one
// group of the changed ones. A candidate nginx takes becomes the good state
// at once, so what is served only ever grows; a refused group of one is
// quarantined, a larger one is split in half. k bad Ingresses among n changed
// cost about 2k·log2(n) reloads, each one a whole step of the loop, so
// endpoint updates keep flowing between them.
type guard struct {
	// good holds the Ingresses of the last full build nginx confirmed,
	// by "namespace/name".
	good map[string]*networkingv1.Ingress
	// used holds the Ingresses of the last full build.
	used map[string]*networkingv1.Ingress
	// quarantine holds the Ingresses nginx refused, as they were then.
	quarantine map[string]quarantined
	// groups is the bisection's queue: groups[0] is under test. Empty when
	// not bisecting.
	groups [][]string
	// onlyGood makes filter use the last good version of every changed
	// Ingress, as a bisection step with an empty group: the loop tries the
	// globals alone (configmap.go).
	onlyGood bool
}

type quarantined struct {
	ingress *networkingv1.Ingress
	// refused says who refused it: nginxRefused or renderRefused.
	refused string
	reason  string // the refuser's words
}

// Who refused a quarantined Ingress, as its Problem says it.
const (
	nginxRefused  = "nginx rejected the config"
	renderRefused = "the agent cannot render nginx.conf"
)

func newGuard() *guard {
	return &guard{quarantine: map[string]quarantined{}}
}

func (g *guard) bisecting() bool { return len(g.groups) > 0 }

// quarantined returns the quarantined Ingresses, sorted.
func (g *guard) quarantinedKeys() []string {
	return slices.Sorted(maps.Keys(g.quarantine))
}

// filter returns the Ingresses a full build uses: a quarantined Ingress is
// replaced by its last good version (or left out when it has none) until it
// changes; while bisecting, changed Ingresses outside the group under test
// keep their good version too. Each quarantined Ingress gets a Problem.
func (g *guard) filter(ingresses []*networkingv1.Ingress) ([]*networkingv1.Ingress, []model.Problem) {
	if len(g.quarantine) == 0 && !g.bisecting() && !g.onlyGood {
		g.used = byKey(ingresses)
		return ingresses, nil
	}
	var testing map[string]bool
	if g.onlyGood {
		testing = map[string]bool{}
	} else if g.bisecting() {
		testing = make(map[string]bool, len(g.groups[0]))
		for _, key := range g.groups[0] {
			testing[key] = true
		}
	}
	present := make(map[string]bool, len(g.quarantine))
	var problems []model.Problem
	out := make([]*networkingv1.Ingress, 0, len(ingresses))
	for _, ing := range ingresses {
		key := ingressKey(ing)
		use := ing
		if q, ok := g.quarantine[key]; ok {
			present[key] = true
			if sameIngress(q.ingress, ing) {
				use = g.good[key]
				problems = append(problems, q.problem(use != nil))
			} else {
				delete(g.quarantine, key) // changed: it is tried again
			}
		}
		if use == ing && testing != nil && !testing[key] && !sameIngress(g.good[key], ing) {
			use = g.good[key]
		}
		if use != nil {
			out = append(out, use)
		}
	}
	for key := range g.quarantine {
		if !present[key] {
			delete(g.quarantine, key) // deleted
		}
	}
	g.used = byKey(out)
	return out, problems
}

// confirmed records that nginx runs the config of the last full build.
func (g *guard) confirmed() {
	g.good = g.used
	if g.bisecting() && !g.onlyGood {
		g.groups = g.groups[1:]
	}
}

// rejected records that nginx refused the config of the last full build,
// saying reason. It returns false when no changed Ingress is left to blame,
// and the config is not tried again before the next change.
func (g *guard) rejected(reason string) bool {
	var group []string
	if g.bisecting() {
		group, g.groups = g.groups[0], g.groups[1:]
	} else {
		for key, ing := range g.used {
			if !sameIngress(g.good[key], ing) {
				group = append(group, key)
			}
		}
		slices.Sort(group)
	}
	switch len(group) {
	case 0:
		return false
	case 1:
		g.quarantine[group[0]] = quarantined{ingress: g.used[group[0]], refused: nginxRefused, reason: reason}
	default:
		half := len(group) / 2
		g.groups = append([][]string{group[:half], group[half:]}, g.groups...)
	}
	return true
}

// refuseRender quarantines the Ingress key of the last full build, which
// render refuses saying reason, like one nginx refused.
func (g *guard) refuseRender(key, reason string) {
	if ing := g.used[key]; ing != nil {
		g.quarantine[key] = quarantined{ingress: ing, refused: renderRefused, reason: reason}
	}
}

// problem is the Problem of the quarantined Ingress key.
func (g *guard) problem(key string) model.Problem {
	return g.quarantine[key].problem(g.good[key] != nil)
}

func (q quarantined) problem(goodServed bool) model.Problem {
	served := "it is not served"
	if goodServed {
		served = "its last version nginx took keeps serving"
	}
	return model.Problem{Kind: "Ingress", Namespace: q.ingress.Namespace, Name: q.ingress.Name,
		Reason: "quarantined: " + q.refused + " with this version of it (" + clipReason(q.reason) + "); " + served + " until it changes"}
}

func clipReason(reason string) string {
	const max = 512
	if len(reason) > max {
		return reason[:max] + "…"
	}
	return reason
}

// nginxReason is the part of a reload error that is nginx's own words.
func nginxReason(err error) string {
	msg := err.Error()
	if _, said, ok := strings.Cut(msg, "nginx said: "); ok {
		return said
	}
	return msg
}

func ingressKey(ing *networkingv1.Ingress) string { return ing.Namespace + "/" + ing.Name }

func byKey(ingresses []*networkingv1.Ingress) map[string]*networkingv1.Ingress {
	m := make(map[string]*networkingv1.Ingress, len(ingresses))
	for _, ing := range ingresses {
		m[ingressKey(ing)] = ing
	}
	return m
}

// sameIngress says whether a and b would build the same: the same object,
// or the same spec and annotations. Sources hand out a new object only
// when one changed, so the deep comparison runs for changed ones alone.
func sameIngress(a, b *networkingv1.Ingress) bool {
	if a == b {
		return true
	}
	if a == nil || b == nil {
		return false
	}
	return maps.Equal(a.Annotations, b.Annotations) && equality.Semantic.DeepEqual(a.Spec, b.Spec)
}
