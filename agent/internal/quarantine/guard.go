// Package quarantine keeps one bad Ingress from blocking the others: it is
// part of the build stage of the pipeline (source → model → render → plan →
// apply), and chooses which version of each Ingress the model is built from.
//
// nginx is the judge of a config, and render can refuse a model too; the
// Guard finds the Ingresses to blame for either by bisection (guard.go for
// nginx, one loop step a reload; render.go for render, in process) and
// keeps each culprit's last good version serving until it changes. It
// holds the Kubernetes objects so that the loop that drives it needs none.
package quarantine

import (
	"maps"
	"slices"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/restysync/restysync/agent/internal/model"
)

// Guard keeps one bad Ingress from blocking the others.
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
type Guard struct {
	// good holds the Ingresses of the last full build nginx confirmed,
	// by "namespace/name".
	good *ingressSet
	// used holds the Ingresses of the last full build.
	used *ingressSet
	// quarantine holds the Ingresses nginx refused, as they were then.
	quarantine map[string]quarantinedIngress
	// groups is the bisection's queue: groups[0] is under test. Empty when
	// not bisecting.
	groups [][]string
	// OnlyGood makes Filter use the last good version of every changed
	// Ingress, as a bisection step with an empty group: the loop tries the
	// ConfigMap's globals alone (syncer/configmap.go).
	OnlyGood bool
}

type quarantinedIngress struct {
	ingress *networkingv1.Ingress
	// refused says who refused it: NginxRefused or RenderRefused.
	refused string
	reason  string // the refuser's words
}

// Who refused a quarantined Ingress, as its Problem says it.
const (
	NginxRefused  = "nginx rejected the config"
	RenderRefused = "the agent cannot render nginx.conf"
)

// New returns a Guard that quarantines nothing yet.
func New() *Guard {
	return &Guard{quarantine: map[string]quarantinedIngress{}}
}

// Bisecting says a bisection is under way: the next full build tests a
// group (Queue).
func (g *Guard) Bisecting() bool { return len(g.groups) > 0 }

// Queue returns the size of the group under test and the number of groups
// left to test, for the log.
func (g *Guard) Queue() (next, groups int) {
	if !g.Bisecting() {
		return 0, 0
	}
	return len(g.groups[0]), len(g.groups)
}

// Keys returns the quarantined Ingresses ("namespace/name"), sorted.
func (g *Guard) Keys() []string {
	return slices.Sorted(maps.Keys(g.quarantine))
}

// Filter returns the Ingresses a full build uses: a quarantined Ingress is
// replaced by its last good version (or left out when it has none) until it
// changes; while bisecting, changed Ingresses outside the group under test
// keep their good version too. Each quarantined Ingress gets a Problem.
func (g *Guard) Filter(ingresses model.List[*networkingv1.Ingress]) (model.List[*networkingv1.Ingress], []model.Problem) {
	if len(g.quarantine) == 0 && !g.Bisecting() && !g.OnlyGood {
		g.used = &ingressSet{list: ingresses}
		return ingresses, nil
	}
	var testing map[string]bool
	if g.OnlyGood {
		testing = map[string]bool{}
	} else if g.Bisecting() {
		testing = make(map[string]bool, len(g.groups[0]))
		for _, key := range g.groups[0] {
			testing[key] = true
		}
	}
	present := make(map[string]bool, len(g.quarantine))
	var problems []model.Problem
	out := make([]*networkingv1.Ingress, 0, ingresses.Len())
	for ing := range ingresses.All() {
		key := ingressKey(ing)
		use := ing
		if q, ok := g.quarantine[key]; ok {
			present[key] = true
			if sameIngress(q.ingress, ing) {
				use = g.good.get(key)
				problems = append(problems, q.problem(use != nil))
			} else {
				delete(g.quarantine, key) // changed: it is tried again
			}
		}
		if use == ing && testing != nil && !testing[key] && !sameIngress(g.good.get(key), ing) {
			use = g.good.get(key)
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
	g.used = &ingressSet{list: model.ListOf(out...)}
	return g.used.list, problems
}

// Confirmed records that nginx runs the config of the last full build.
func (g *Guard) Confirmed() {
	g.good = g.used
	if g.Bisecting() && !g.OnlyGood {
		g.groups = g.groups[1:]
	}
}

// Rejected records that nginx refused the config of the last full build,
// saying reason, and returns the Ingress it quarantined for it, if any.
// blamed is false when no changed Ingress is left to blame, and the config
// is not tried again before the next change.
func (g *Guard) Rejected(reason string) (quarantined []string, blamed bool) {
	var group []string
	if g.Bisecting() {
		group, g.groups = g.groups[0], g.groups[1:]
	} else {
		for key, ing := range g.used.byKey() {
			if !sameIngress(g.good.get(key), ing) {
				group = append(group, key)
			}
		}
		slices.Sort(group)
	}
	switch len(group) {
	case 0:
		return nil, false
	case 1:
		key := group[0]
		if _, already := g.quarantine[key]; !already {
			quarantined = []string{key}
		}
		g.quarantine[key] = quarantinedIngress{ingress: g.used.get(key), refused: NginxRefused, reason: reason}
	default:
		half := len(group) / 2
		g.groups = append([][]string{group[:half], group[half:]}, g.groups...)
	}
	return quarantined, true
}

// Trusted says whether ing is the version of it in the last config nginx
// took: known to render, never blamed (RenderFailures).
func (g *Guard) Trusted(ing *networkingv1.Ingress) bool {
	return sameIngress(g.good.get(ingressKey(ing)), ing)
}

// Problem is the Problem of the quarantined Ingress key.
func (g *Guard) Problem(key string) model.Problem {
	return g.quarantine[key].problem(g.good.get(key) != nil)
}

func (q quarantinedIngress) problem(goodServed bool) model.Problem {
	served := "it is not served"
	if goodServed {
		served = "its last version nginx took keeps serving"
	}
	return model.Problem{Kind: "Ingress", Namespace: q.ingress.Namespace, Name: q.ingress.Name,
		Reason: "quarantined: " + q.refused + " with this version of it (" + ClipReason(q.reason) + "); " + served + " until it changes"}
}

// ClipReason cuts a refuser's words to 512 bytes for a Problem.
func ClipReason(reason string) string {
	const max = 512
	if len(reason) > max {
		return reason[:max] + "…"
	}
	return reason
}

// NginxReason is the part of a reload error that is nginx's own words.
func NginxReason(err error) string {
	msg := err.Error()
	if _, said, ok := strings.Cut(msg, "nginx said: "); ok {
		return said
	}
	return msg
}

func ingressKey(ing *networkingv1.Ingress) string { return ing.Namespace + "/" + ing.Name }

// ingressSet is the Ingresses of one build; by "namespace/name" only once
// asked (a quarantine, a bisection, a render failure): a sync with none
// of those does not key 50,000 Ingresses.
type ingressSet struct {
	list model.List[*networkingv1.Ingress]
	keys map[string]*networkingv1.Ingress // made by byKey
}

// byKey returns the Ingresses by "namespace/name" (nil for a nil set).
func (s *ingressSet) byKey() map[string]*networkingv1.Ingress {
	if s == nil {
		return nil
	}
	if s.keys == nil {
		s.keys = make(map[string]*networkingv1.Ingress, s.list.Len())
		for ing := range s.list.All() {
			s.keys[ingressKey(ing)] = ing
		}
	}
	return s.keys
}

// get returns the Ingress key names, nil when there is none.
func (s *ingressSet) get(key string) *networkingv1.Ingress { return s.byKey()[key] }

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
