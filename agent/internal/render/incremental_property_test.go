package render

import (
	"bytes"
	"cmp"
	"flag"
	"fmt"
	mathrand "math/rand"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/source"
)

// TestIncrementalEqualsBuild is the property of model.Incremental: over
// random sequences of changes to the random snapshots of
// TestRandomSnapshotsNginxAccepts (its generators: odd hosts that merge
// and conflict, every annotation, TLS, canaries, default backends), the
// model and problems it builds equal model.Build's after every step. The
// changes: an Ingress created, replaced, deleted, its host renamed, moved
// to another class and back; a Secret rotated, turned to junk or deleted;
// a Service's ports changed or deleted; an EndpointSlice created, moved
// or deleted (in half the sequences without its label, as the file
// source hands it out: unlabelledSlices); a
// ConfigMap Ingresses name edited; the agent's ConfigMap's TCP services
// changed; the default certificate set; the clock past the
// certificates' expiry. Beside the Ingresses, the Gateway API objects of
// TestRandomSnapshotsNginxAccepts (randomGatewayObjects) and HTTPRoutes
// whose hostnames cover each other (route islands): an HTTPRoute created,
// replaced, deleted, a hostname renamed, a listener's hostname changed, a
// Gateway's status written. It
// lives beside those generators (package render) and checks the model
// only.
//
// A failure names the sequence's seed; rerun it alone with
//
//	go test ./agent/internal/render -run TestIncrementalEqualsBuild -incremental.seed=N -incremental.sequences=1
var (
	incrementalSeed      = flag.Int64("incremental.seed", 1, "first seed of TestIncrementalEqualsBuild; sequence i uses seed+i")
	incrementalSequences = flag.Int("incremental.sequences", 150, "how many random change sequences TestIncrementalEqualsBuild checks (30 with -short); thousands: -incremental.sequences=5000")
)

const incrementalSteps = 12

func TestIncrementalEqualsBuild(t *testing.T) {
	world := newRandomWorld()
	n := *incrementalSequences
	if testing.Short() && n > 30 {
		n = 30
	}
	start := time.Now()
	paths := map[string]int{}
	for i := range n {
		seed := *incrementalSeed + int64(i)
		if err := checkIncrementalSequence(world, seed, paths); err != nil {
			t.Fatalf("seed %d (rerun: -incremental.seed=%d -incremental.sequences=1): %v", seed, seed, err)
		}
	}
	t.Logf("builds saying which servers changed: %d, not: %d; cached renders looking at those alone: %d",
		changedServersStats[true], changedServersStats[false], cacheWalked[false])
	if cacheWalked[false] < n*incrementalSteps/3 {
		t.Errorf("only %d of %d cached renders looked at the changed servers alone: the hint is tried on too few", cacheWalked[false], n*incrementalSteps)
	}
	t.Logf("builds saying which Gateway routes changed: %d, not: %d; cached renders of Gateway routes looking at those alone: %d, at every one: %d",
		changedGatewayRoutesStats[true], changedGatewayRoutesStats[false], gatewayWalked[false], gatewayWalked[true])
	if gatewayWalked[false] < n*incrementalSteps/10 {
		t.Errorf("only %d of %d cached renders looked at the changed Gateway routes alone: the hint is tried on too few", gatewayWalked[false], n*incrementalSteps)
	}
	t.Logf("%d sequences of %d changes in %s: %v; cached renders reusing nginx.conf: %d, rendering it: %d; saying which routes changed: %d, not: %d", n, incrementalSteps,
		time.Since(start).Round(time.Millisecond), paths, cacheStats[true], cacheStats[false], changedRoutesStats[true], changedRoutesStats[false])
	if changedRoutesStats[true] < n*incrementalSteps/2 {
		t.Errorf("only %d of %d renders said which routes changed: the hint is checked on too few", changedRoutesStats[true], n*incrementalSteps)
	}
	if paths["incremental"] < n*incrementalSteps/3 {
		t.Errorf("only %d of %d steps were incremental: the property is checked on too few", paths["incremental"], n*incrementalSteps)
	}
	if paths["some HTTPRoutes"] < n*incrementalSteps/20 {
		t.Errorf("only %d of %d steps built some of the HTTPRoutes (route islands): the property is checked on too few", paths["some HTTPRoutes"], n*incrementalSteps)
	}
}

func checkIncrementalSequence(world *randomWorld, seed int64, paths map[string]int) error {
	rng := mathrand.New(mathrand.NewSource(seed))
	s := world.snapshot(rng)
	s.Now = time.Now()
	gatewayRNG := mathrand.New(mathrand.NewSource(seed ^ 0x31))
	randomGatewayObjects(gatewayRNG, &s)
	for i := range s.HTTPRoutes.Len() {
		s.HTTPRoutes = listWithAt(s.HTTPRoutes, i, islandRoute(gatewayRNG, s.HTTPRoutes.At(i)))
	}
	hosts := make([]string, 4+rng.Intn(6))
	for i := range hosts {
		hosts[i] = randomHost(rng)
	}
	for ing := range s.Ingresses.All() {
		for _, r := range ing.Spec.Rules {
			hosts = append(hosts, r.Host)
		}
	}
	// www twins, for from-to-www-redirect to meet.
	for _, h := range hosts[:4] {
		hosts = append(hosts, "www."+h)
	}
	inc := model.NewIncremental()
	cache := NewCache()
	settings := randomSettings(rng, "/srv/restysync")
	var keep []Profile
	next := 100
	var log []string
	// Every other sequence hands its lists sorted by namespace and name,
	// as the file source does (the Incremental then walks them side by
	// side); the others in the generators' order, as the kube source's
	// informers do.
	ordered := seed%2 == 0
	// Half the sequences (of both orders) hand out their EndpointSlices
	// as the file source does: without the one label, the Service named
	// by the snapshot's SliceServices (unlabelledSlices).
	var unlabelled *unlabelledSlices
	if seed%4 < 2 {
		unlabelled = newUnlabelledSlices()
	}
	// Half the sequences of each kind above hand out the index of their
	// EndpointSlices by Service, as the sources do (Snapshot.SlicesOf).
	indexed := seed/4%2 == 0
	var lastServers model.List[*model.Server]
	var lastGatewayRoutes model.List[*model.Route]
	for step := range incrementalSteps + 1 {
		if step > 0 {
			if s.Gateways.Len() > 0 && rng.Intn(2) == 0 {
				log = append(log, changeGatewayAPI(rng, &s, &next))
			} else {
				log = append(log, changeSnapshot(rng, world, &s, hosts, &next))
			}
			if rng.Intn(8) == 0 {
				settings, keep = changeRenderInputs(rng, settings, keep)
				log = append(log, "render settings or kept profiles")
			}
		}
		in := s
		if ordered {
			in = orderedSnapshot(s)
		}
		if unlabelled != nil {
			in = unlabelled.snapshot(in)
		}
		if indexed {
			in = withSlicesOf(in)
		}
		got, gotProblems, path := inc.Build(in)
		want, wantProblems := model.Build(in)
		if strings.Contains(path.Reason, "built whole") || strings.Contains(path.Reason, "islands") {
			return fmt.Errorf("step %d (%s): the islands failed: %s", step, strings.Join(log, "; "), path.Reason)
		}
		if !reflect.DeepEqual(got, want) {
			return fmt.Errorf("step %d (%s, path %+v): model differs:\n%s", step, strings.Join(log, "; "), path, modelDiff(want, got))
		}
		if !reflect.DeepEqual(gotProblems, wantProblems) {
			return fmt.Errorf("step %d (%s, path %+v): problems differ:\n got %q\nwant %q", step, strings.Join(log, "; "), path, gotProblems, wantProblems)
		}
		if err := checkChangedServers(inc, lastServers, got.Servers); err != nil {
			return fmt.Errorf("step %d (%s, path %+v): %w", step, strings.Join(log, "; "), path, err)
		}
		lastServers = got.Servers
		if err := checkChangedGatewayRoutes(inc, lastGatewayRoutes, got.GatewayRoutes); err != nil {
			return fmt.Errorf("step %d (%s, path %+v): %w", step, strings.Join(log, "; "), path, err)
		}
		lastGatewayRoutes = got.GatewayRoutes
		// As the syncer does: the cache looks at the changed servers
		// and Gateway routes alone when the hint is relative to the
		// model it rendered last.
		from, hosts, _ := inc.ChangedServers()
		cache.ServersChanged(from, hosts)
		gatewayFrom, gatewayHosts, _ := inc.ChangedGatewayRoutes()
		cache.GatewayRoutesChanged(gatewayFrom, gatewayHosts)
		var err error
		if keep, err = checkCacheStep(cache, got, settings, keep, rng); err != nil {
			return fmt.Errorf("step %d (%s, path %+v): %w", step, strings.Join(log, "; "), path, err)
		}
		if step > 0 {
			if path.Incremental {
				paths["incremental"]++
				if path.HTTPRoutes > 0 && !path.Globals {
					paths["some HTTPRoutes"]++
				}
			} else {
				paths["full"]++
			}
		}
	}
	return nil
}

// unlabelledSlices hands out EndpointSlices as a source that drops a
// slice's one label does (source.DropServiceLabel): a copy without
// labels, the same copy each time the same slice comes, its Service kept
// beside it. Each snapshot's SliceServices answers for the slices of that
// snapshot alone, as the file source's view does: a model that asked the
// next snapshot about a slice of the last one (one deleted, or moved to
// another Service) would find no Service and differ from Build.
type unlabelledSlices struct {
	copies   map[*discoveryv1.EndpointSlice]*discoveryv1.EndpointSlice
	services map[*discoveryv1.EndpointSlice]string
}

func newUnlabelledSlices() *unlabelledSlices {
	return &unlabelledSlices{copies: map[*discoveryv1.EndpointSlice]*discoveryv1.EndpointSlice{},
		services: map[*discoveryv1.EndpointSlice]string{}}
}

func (u *unlabelledSlices) snapshot(s model.Snapshot) model.Snapshot {
	held := map[*discoveryv1.EndpointSlice]string{}
	out := make([]*discoveryv1.EndpointSlice, s.EndpointSlices.Len())
	for i, slice := range s.EndpointSlices.Slice() {
		c, ok := u.copies[slice]
		if !ok {
			c = slice.DeepCopy()
			if service, dropped := source.DropServiceLabel(c); dropped {
				u.services[c] = service
			}
			u.copies[slice] = c
		}
		out[i] = c
		if service, ok := u.services[c]; ok {
			held[c] = service
		}
	}
	s.EndpointSlices = model.ListOf(out...)
	s.SliceServices = func(slice *discoveryv1.EndpointSlice) string { return held[slice] }
	return s
}

// withSlicesOf is s with a SlicesOf of its EndpointSlices, each
// Service's in the reverse of their order in the list (the order is the
// source's, and must not matter).
func withSlicesOf(s model.Snapshot) model.Snapshot {
	type key struct{ namespace, name string }
	index := map[key][]*discoveryv1.EndpointSlice{}
	list := s.EndpointSlices.Slice()
	for i := len(list) - 1; i >= 0; i-- {
		if service := s.ServiceOfSlice(list[i]); service != "" {
			k := key{list[i].Namespace, service}
			index[k] = append(index[k], list[i])
		}
	}
	s.SlicesOf = func(namespace, service string) []*discoveryv1.EndpointSlice { return index[key{namespace, service}] }
	return s
}

// orderedSnapshot is s with its lists of Ingresses, Services,
// EndpointSlices, Secrets and ConfigMaps sorted by namespace and name
// (new slices; s is not changed).
func orderedSnapshot(s model.Snapshot) model.Snapshot {
	s.Ingresses = model.ListOf(sortedByName(s.Ingresses.Slice())...)
	s.Services = model.ListOf(sortedByName(s.Services.Slice())...)
	s.EndpointSlices = model.ListOf(sortedByName(s.EndpointSlices.Slice())...)
	s.Secrets = model.ListOf(sortedByName(s.Secrets.Slice())...)
	s.ConfigMaps = model.ListOf(sortedByName(s.ConfigMaps.Slice())...)
	return s
}

func sortedByName[T interface {
	GetNamespace() string
	GetName() string
}](list []T) []T {
	out := slices.Clone(list)
	slices.SortStableFunc(out, func(a, b T) int {
		return cmp.Or(strings.Compare(a.GetNamespace(), b.GetNamespace()), strings.Compare(a.GetName(), b.GetName()))
	})
	return out
}

// changeSnapshot makes one random change to s, replacing objects (never
// changing one in place, as the sources do), and says what it did.
func changeSnapshot(rng *mathrand.Rand, world *randomWorld, s *model.Snapshot, hosts []string, next *int) string {
	pickIngress := func() int { return rng.Intn(s.Ingresses.Len()) }
	if s.Ingresses.Len() == 0 {
		s.Ingresses = model.ListOf(randomIngress(rng, *next, hosts))
		*next++
		return "create into an empty snapshot"
	}
	switch rng.Intn(16) {
	case 14, 15:
		// What couples hosts beyond rules: an alias, a www twin, a TLS
		// host of a Secret another Ingress may claim.
		i := pickIngress()
		ing := s.Ingresses.At(i).DeepCopy()
		prefix := pick(rng, annotationPrefixes)
		switch rng.Intn(3) {
		case 0:
			ing.Annotations[prefix+"server-alias"] = pick(rng, hosts) + "," + pick(rng, hosts)
		case 1:
			ing.Annotations[prefix+"from-to-www-redirect"] = "true"
		default:
			ing.Spec.TLS = append(ing.Spec.TLS, networkingv1.IngressTLS{
				SecretName: pick(rng, []string{"tls-exact", "tls-wildcard", "tls-junk", "missing"}),
				Hosts:      []string{pick(rng, hosts), pick(rng, hosts)}})
		}
		s.Ingresses = model.ListOf(replaced(s.Ingresses.Slice(), i, ing)...)
		return "couple " + ing.Namespace + "/" + ing.Name
	case 0, 1:
		ing := randomIngress(rng, *next, hosts)
		*next++
		if rng.Intn(6) == 0 && len(ing.Spec.Rules) > 0 {
			s.Ingresses = model.ListOf(append(slices.Clip(s.Ingresses.Slice()), randomCanary(rng, *next, ing))...)
		}
		s.Ingresses = model.ListOf(append(slices.Clip(s.Ingresses.Slice()), ing)...)
		return "create " + ing.Namespace + "/" + ing.Name
	case 2, 3:
		i := pickIngress()
		old := s.Ingresses.At(i)
		ing := randomIngress(rng, 0, hosts)
		ing.Namespace, ing.Name = old.Namespace, old.Name
		if rng.Intn(2) == 0 {
			ing.CreationTimestamp = old.CreationTimestamp
		}
		s.Ingresses = model.ListOf(replaced(s.Ingresses.Slice(), i, ing)...)
		return "update " + ing.Namespace + "/" + ing.Name
	case 4:
		i := pickIngress()
		name := s.Ingresses.At(i).Namespace + "/" + s.Ingresses.At(i).Name
		s.Ingresses = model.ListOf(slices.Delete(s.Ingresses.Slice(), i, i+1)...)
		return "delete " + name
	case 5, 6:
		i := pickIngress()
		ing := s.Ingresses.At(i).DeepCopy()
		if len(ing.Spec.Rules) == 0 {
			ing.Spec.Rules = []networkingv1.IngressRule{{Host: pick(rng, hosts)}}
		}
		r := rng.Intn(len(ing.Spec.Rules))
		ing.Spec.Rules[r].Host = pick(rng, hosts)
		if rng.Intn(4) == 0 {
			ing.Spec.Rules[r].Host = randomHost(rng)
		}
		if len(ing.Spec.TLS) > 0 && rng.Intn(2) == 0 && len(ing.Spec.TLS[0].Hosts) > 0 {
			ing.Spec.TLS[0].Hosts[0] = ing.Spec.Rules[r].Host
		}
		s.Ingresses = model.ListOf(replaced(s.Ingresses.Slice(), i, ing)...)
		return "rename a host of " + ing.Namespace + "/" + ing.Name + " to " + ing.Spec.Rules[r].Host
	case 7:
		i := pickIngress()
		ing := s.Ingresses.At(i).DeepCopy()
		class := pick(rng, []string{"restysync", "nginx", "other"})
		switch rng.Intn(3) {
		case 0:
			ing.Spec.IngressClassName = &class
		case 1:
			ing.Spec.IngressClassName = nil
			ing.Annotations["kubernetes.io/ingress.class"] = class
		default:
			ing.Spec.IngressClassName = nil
			delete(ing.Annotations, "kubernetes.io/ingress.class")
		}
		s.Ingresses = model.ListOf(replaced(s.Ingresses.Slice(), i, ing)...)
		return "move " + ing.Namespace + "/" + ing.Name + " to class " + class
	case 8:
		i := rng.Intn(s.Secrets.Len())
		secret := s.Secrets.At(i).DeepCopy()
		switch rng.Intn(4) {
		case 0:
			s.Secrets = model.ListOf(slices.Delete(s.Secrets.Slice(), i, i+1)...)
			return "delete Secret " + secret.Namespace + "/" + secret.Name
		case 1:
			pair := randomCertificate(pick(rng, []string{"app.example.com", "a.example.com", "localhost"}), "*.example.com")
			secret.Data = map[string][]byte{corev1.TLSCertKey: pair.cert, corev1.TLSPrivateKeyKey: pair.key}
			secret.Type = corev1.SecretTypeTLS
		case 2:
			secret.Data = map[string][]byte{corev1.TLSCertKey: []byte("junk"), corev1.TLSPrivateKeyKey: []byte("junk"), "auth": []byte("carol:{SHA}x\n")}
		}
		s.Secrets = model.ListOf(replaced(s.Secrets.Slice(), i, secret)...)
		return "rotate Secret " + secret.Namespace + "/" + secret.Name
	case 9:
		i := rng.Intn(s.Services.Len())
		svc := s.Services.At(i).DeepCopy()
		if rng.Intn(3) == 0 {
			s.Services = model.ListOf(slices.Delete(s.Services.Slice(), i, i+1)...)
			return "delete Service " + svc.Namespace + "/" + svc.Name
		}
		svc.Ports = []model.ServicePort{{Name: pick(rng, []string{"http", "alt", "other"}), Port: pick(rng, []int32{80, 8080, 81})}}
		s.Services = model.ListOf(replaced(s.Services.Slice(), i, svc)...)
		return "change Service " + svc.Namespace + "/" + svc.Name
	case 10:
		if s.EndpointSlices.Len() == 0 || rng.Intn(6) == 0 {
			slice := &discoveryv1.EndpointSlice{
				ObjectMeta: metav1.ObjectMeta{Namespace: pick(rng, randomNamespaces), Name: fmt.Sprintf("slice-%d", *next),
					Labels: map[string]string{discoveryv1.LabelServiceName: pick(rng, randomServices)}},
				AddressType: discoveryv1.AddressTypeIPv4,
				Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{fmt.Sprintf("127.0.0.%d", 3+rng.Intn(200))}}},
			}
			*next++
			s.EndpointSlices = model.ListOf(append(slices.Clip(s.EndpointSlices.Slice()), slice)...)
			return "create EndpointSlice " + slice.Namespace + "/" + slice.Name
		}
		i := rng.Intn(s.EndpointSlices.Len())
		slice := s.EndpointSlices.At(i).DeepCopy()
		if rng.Intn(5) == 0 {
			s.EndpointSlices = model.ListOf(slices.Delete(s.EndpointSlices.Slice(), i, i+1)...)
			return "delete EndpointSlice " + slice.Namespace + "/" + slice.Name
		}
		slice.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{fmt.Sprintf("127.0.0.%d", 3+rng.Intn(200))}}}
		if rng.Intn(4) == 0 {
			slice.Labels = map[string]string{discoveryv1.LabelServiceName: pick(rng, randomServices)}
		}
		s.EndpointSlices = model.ListOf(replaced(s.EndpointSlices.Slice(), i, slice)...)
		return "move EndpointSlice " + slice.Namespace + "/" + slice.Name
	case 11:
		i := rng.Intn(s.ConfigMaps.Len())
		cm := s.ConfigMaps.At(i).DeepCopy()
		cm.Data = map[string]string{"X-Changed": pick(rng, []string{"a", "$host", "b;"})}
		s.ConfigMaps = model.ListOf(replaced(s.ConfigMaps.Slice(), i, cm)...)
		return "edit ConfigMap " + cm.Namespace + "/" + cm.Name
	case 12:
		switch rng.Intn(3) {
		case 0:
			s.TCPServices = randomServicesConfigMap(rng, "tcp-services")
			return "change the TCP services"
		case 1:
			s.DefaultCertificate = pick(rng, []string{"", "default/tls-exact", "team-a/tls-junk", "x/missing"})
			return "default certificate " + s.DefaultCertificate
		}
		s.Now = s.Now.Add(25 * time.Hour)
		return "the certificates expire"
	}
	// A world object back, or a Secret to a new object of equal content.
	i := rng.Intn(len(world.secrets))
	secret := world.secrets[i].DeepCopy()
	for j, old := range s.Secrets.Slice() {
		if old.Namespace == secret.Namespace && old.Name == secret.Name {
			s.Secrets = model.ListOf(replaced(s.Secrets.Slice(), j, secret)...)
			return "re-create Secret " + secret.Namespace + "/" + secret.Name
		}
	}
	s.Secrets = model.ListOf(append(slices.Clip(s.Secrets.Slice()), secret)...)
	return "restore Secret " + secret.Namespace + "/" + secret.Name
}

// routeHostnames are the hostnames of the property's HTTPRoutes: names
// and wildcards that cover each other, and a few the model leaves out.
var routeHostnames = []gatewayv1.Hostname{"a.example.com", "b.example.com", "x.a.example.com", "*.example.com", "*.a.example.com",
	"example.com", "c.test", "*.test", "A.Example.com", "bad host"}

// islandRoute is r with one to three hostnames of routeHostnames (none,
// once in a while: a route of every host of its listeners) and a
// creation time of a few.
func islandRoute(rng *mathrand.Rand, r *gatewayv1.HTTPRoute) *gatewayv1.HTTPRoute {
	r = r.DeepCopy()
	r.Spec.Hostnames = nil
	if rng.Intn(40) > 0 {
		for range 1 + rng.Intn(3) {
			r.Spec.Hostnames = append(r.Spec.Hostnames, pick(rng, routeHostnames))
		}
	}
	r.CreationTimestamp = metav1.NewTime(time.Date(2026, 1, 1, 0, rng.Intn(3), 0, 0, time.UTC))
	return r
}

// changeGatewayAPI makes one random change to s's HTTPRoutes or
// Gateways, and says what it did.
func changeGatewayAPI(rng *mathrand.Rand, s *model.Snapshot, next *int) string {
	if s.HTTPRoutes.Len() == 0 || rng.Intn(5) == 0 {
		r := islandRoute(rng, randomHTTPRoute(rng, 0, s))
		r.Name = fmt.Sprintf("route-%d", *next)
		*next++
		s.HTTPRoutes = model.ListOf(append(slices.Clip(s.HTTPRoutes.Slice()), r)...)
		return "create HTTPRoute " + r.Name + " for " + fmt.Sprint(r.Spec.Hostnames)
	}
	i := rng.Intn(s.HTTPRoutes.Len())
	old := s.HTTPRoutes.At(i)
	switch rng.Intn(6) {
	case 0:
		r := islandRoute(rng, randomHTTPRoute(rng, 0, s))
		r.Name = old.Name
		s.HTTPRoutes = model.ListOf(replaced(s.HTTPRoutes.Slice(), i, r)...)
		return "update HTTPRoute " + r.Name
	case 1:
		s.HTTPRoutes = model.ListOf(slices.Delete(s.HTTPRoutes.Slice(), i, i+1)...)
		return "delete HTTPRoute " + old.Name
	case 2, 3:
		r := old.DeepCopy()
		if len(r.Spec.Hostnames) == 0 {
			r.Spec.Hostnames = []gatewayv1.Hostname{""}
		}
		r.Spec.Hostnames[rng.Intn(len(r.Spec.Hostnames))] = pick(rng, routeHostnames)
		s.HTTPRoutes = model.ListOf(replaced(s.HTTPRoutes.Slice(), i, r)...)
		return "rename a hostname of HTTPRoute " + r.Name + " to " + fmt.Sprint(r.Spec.Hostnames)
	case 4:
		r := old.DeepCopy()
		r.Generation++
		r.CreationTimestamp = metav1.NewTime(time.Date(2026, 1, 1, 0, rng.Intn(3), 0, 0, time.UTC))
		s.HTTPRoutes = model.ListOf(replaced(s.HTTPRoutes.Slice(), i, r)...)
		return "age HTTPRoute " + r.Name
	}
	g := rng.Intn(s.Gateways.Len())
	gw := s.Gateways.At(g).DeepCopy()
	if rng.Intn(2) == 0 {
		// The status the agent writes; now and then addresses, which
		// Build reads.
		gw.ResourceVersion += "1"
		gw.Status.Listeners = []gatewayv1.ListenerStatus{{Name: "la", AttachedRoutes: int32(rng.Intn(5))}}
		if rng.Intn(3) == 0 {
			gw.Status.Addresses = []gatewayv1.GatewayStatusAddress{{Value: pick(rng, []string{"127.29.50.1", "127.29.50.2", "::1"})}}
		}
		s.Gateways = model.ListOf(replaced(s.Gateways.Slice(), g, gw)...)
		return "status of Gateway " + gw.Name
	}
	l := &gw.Spec.Listeners[rng.Intn(len(gw.Spec.Listeners))]
	if h := pick(rng, append([]gatewayv1.Hostname{""}, routeHostnames...)); h != "" {
		l.Hostname = &h
	} else {
		l.Hostname = nil
	}
	s.Gateways = model.ListOf(replaced(s.Gateways.Slice(), g, gw)...)
	return "listener hostname of Gateway " + gw.Name
}

// replaced is list with v at i, in a new slice.
// listWithAt returns a copy of list with item i replaced by v.
func listWithAt[T any](list model.List[T], i int, v T) model.List[T] {
	return model.ListOf(replaced(list.Slice(), i, v)...)
}

func replaced[T any](list []T, i int, v T) []T {
	out := slices.Clone(list)
	out[i] = v
	return out
}

// modelDiff names the first parts of want and got that differ.
func modelDiff(want, got model.Model) string {
	var b strings.Builder
	wv, gv := reflect.ValueOf(want), reflect.ValueOf(got)
	for i := range wv.NumField() {
		if !reflect.DeepEqual(wv.Field(i).Interface(), gv.Field(i).Interface()) {
			fmt.Fprintf(&b, "%s:\n got %+v\nwant %+v\n", wv.Type().Field(i).Name, gv.Field(i).Interface(), wv.Field(i).Interface())
		}
	}
	out := b.String()
	if len(out) > 6000 {
		out = out[:6000] + "…"
	}
	return out
}

// cacheStats counts the cached renders that reused nginx.conf (true) and
// those that rendered it.
var cacheStats = map[bool]int{}

// cacheWalked counts the cached renders that looked at every server
// (true) and those that looked at the changed ones alone.
var cacheWalked = map[bool]int{}

// gatewayWalked counts the cached renders of a model with Gateway routes
// that looked at every one (true) and those that looked at the changed
// ones alone.
var gatewayWalked = map[bool]int{}

// changedRoutesStats counts the cached renders that said which routes
// changed (true) and those that could not.
var changedRoutesStats = map[bool]int{}

// checkCacheStep renders m with cache and with Build, and says how they
// differ: config (bytes, hash, profiles, files, the view Changes reads),
// routes or error. It returns the profiles the next step keeps: now and
// then some of this config's, as the syncer keeps those Lua still names.
func checkCacheStep(cache *Cache, m model.Model, s Settings, keep []Profile, rng *mathrand.Rand) ([]Profile, error) {
	gotCfg, gotRoutes, gotErr := cache.Build(m, s, keep...)
	cacheStats[cache.Stats().ConfReused]++
	cacheWalked[cache.Stats().Walked || cache.Stats().Whole]++
	if m.GatewayRoutes.Len() > 0 {
		gatewayWalked[cache.Stats().GatewayWalked || cache.Stats().Whole]++
	}
	wantCfg, wantRoutes, wantErr := Build(m, s, keep...)
	if (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error() {
		return nil, fmt.Errorf("cached render: error %v, want %v", gotErr, wantErr)
	}
	if wantErr != nil {
		return nil, nil
	}
	if gotCfg.Hash != wantCfg.Hash || !bytes.Equal(gotCfg.Bytes, wantCfg.Bytes) {
		return nil, fmt.Errorf("cached render: nginx.conf differs:\n%s", lineDiff(string(wantCfg.Bytes), string(gotCfg.Bytes)))
	}
	if !reflect.DeepEqual(gotCfg, wantCfg) {
		return nil, fmt.Errorf("cached render: config differs (profiles, files, backend TLS or view)")
	}
	if err := checkRouteList(gotRoutes); err != nil {
		return nil, fmt.Errorf("cached render: %w", err)
	}
	if got, want := gotRoutes.Slice(), NewRouteList(wantRoutes).Slice(); !reflect.DeepEqual(got, want) {
		return nil, fmt.Errorf("cached render: routes differ:\n got %+v\nwant %+v", got, want)
	}
	if err := checkChangedRoutes(cache, gotRoutes); err != nil {
		return nil, err
	}
	if rng.Intn(4) == 0 && len(wantCfg.Profiles) > 0 {
		return wantCfg.Profiles[:rng.Intn(len(wantCfg.Profiles))+1], nil
	}
	return keep, nil
}

// lastCacheRoutes are the routes each cache's last render returned.
var lastCacheRoutes = map[*Cache]RouteList{}

// checkChangedRoutes checks Cache.ChangedRoutes after a render that
// returned routes: from is the very list the render before returned, and
// every host whose route differs between the two (or that only one
// routes) is among hosts. Plan trusts it (plan.Next.ChangedRoutes).
func checkChangedRoutes(cache *Cache, routes RouteList) error {
	last := lastCacheRoutes[cache]
	lastCacheRoutes[cache] = routes
	from, hosts, ok := cache.ChangedRoutes()
	if !ok {
		changedRoutesStats[false]++
		return nil
	}
	changedRoutesStats[true]++
	if !from.Same(last) && (from.Len() > 0 || last.Len() > 0) {
		return fmt.Errorf("ChangedRoutes: from is not the routes the render before returned")
	}
	byHost := func(list RouteList) map[string]model.Route {
		out := make(map[string]model.Route, list.Len())
		for r := range list.All() {
			out[r.Host] = r
		}
		return out
	}
	before, after := byHost(from), byHost(routes)
	for _, side := range []map[string]model.Route{before, after} {
		for host := range side {
			a, inA := before[host]
			b, inB := after[host]
			if (inA != inB || !reflect.DeepEqual(a, b)) && !hosts[host] {
				return fmt.Errorf("ChangedRoutes: the route of %q changed (%+v → %+v) and is not among the hosts %v", host, a, b, hosts)
			}
		}
	}
	return nil
}

// changedServersStats counts the incremental builds that said which
// servers changed (true) and those that could not.
var changedServersStats = map[bool]int{}

// checkChangedServers checks model.Incremental.ChangedServers after a
// build that returned servers: from is the very list the build before
// returned (last), and every host whose server is not the very same
// pointer in both (or that only one has) is among hosts. render.Cache
// trusts it (ServersChanged).
func checkChangedServers(inc *model.Incremental, last, servers model.List[*model.Server]) error {
	from, hosts, ok := inc.ChangedServers()
	changedServersStats[ok]++
	if !ok {
		return nil
	}
	if from.Len() != last.Len() || from.Len() > 0 && !from.Same(last) {
		return fmt.Errorf("ChangedServers: from is not the servers the build before returned")
	}
	before := map[string]*model.Server{}
	for srv := range from.All() {
		before[srv.Host] = srv
	}
	after := map[string]*model.Server{}
	for srv := range servers.All() {
		after[srv.Host] = srv
	}
	for _, side := range []map[string]*model.Server{before, after} {
		for host := range side {
			if before[host] != after[host] && !hosts[host] {
				return fmt.Errorf("ChangedServers: the server of %q changed and is not among the hosts %v", host, hosts)
			}
		}
	}
	return nil
}

// changedGatewayRoutesStats counts the incremental builds that said
// which Gateway routes changed (true) and those that could not.
var changedGatewayRoutesStats = map[bool]int{}

// checkChangedGatewayRoutes checks model.Incremental.ChangedGatewayRoutes
// after a build that returned routes: from is the very list the build
// before returned (last), routes are sorted by host, each once, and every
// host whose route is not the very same pointer in both (or that only one
// has) is among hosts. render.Cache trusts it (GatewayRoutesChanged).
func checkChangedGatewayRoutes(inc *model.Incremental, last, list model.List[*model.Route]) error {
	from, hosts, ok := inc.ChangedGatewayRoutes()
	changedGatewayRoutesStats[ok]++
	if !ok {
		return nil
	}
	if from.Len() != last.Len() || from.Len() > 0 && !from.Same(last) {
		return fmt.Errorf("ChangedGatewayRoutes: from is not the routes the build before returned")
	}
	routes := list.Slice()
	for i := 1; i < len(routes); i++ {
		if routes[i-1].Host >= routes[i].Host {
			return fmt.Errorf("ChangedGatewayRoutes: the routes are not sorted by host, each once: %q before %q", routes[i-1].Host, routes[i].Host)
		}
	}
	before := map[string]*model.Route{}
	for r := range from.All() {
		before[r.Host] = r
	}
	after := map[string]*model.Route{}
	for _, r := range routes {
		after[r.Host] = r
	}
	for _, side := range []map[string]*model.Route{before, after} {
		for host := range side {
			if before[host] != after[host] && !hosts[host] {
				return fmt.Errorf("ChangedGatewayRoutes: the route of %q changed and is not among the hosts %v", host, hosts)
			}
		}
	}
	return nil
}

// changeRenderInputs changes what besides the model a render reads: the
// request metrics, the ConfigMap's body size, or the kept profiles.
func changeRenderInputs(rng *mathrand.Rand, s Settings, keep []Profile) (Settings, []Profile) {
	switch rng.Intn(3) {
	case 0:
		if s.RequestMetrics == nil {
			s.RequestMetrics = &RequestMetrics{}
		} else {
			s.RequestMetrics = nil
		}
	case 1:
		h := DefaultHTTP()
		if s.HTTP != nil {
			h = *s.HTTP
		}
		h.ClientMaxBodySize = pick(rng, []string{"1m", "0", "512k", "1024k", "8m"})
		s.HTTP = &h
	default:
		keep = nil
	}
	return s, keep
}
