package status

// Gateway Services: the leader keeps the Service and EndpointSlices the
// model wants for each accepted Gateway (model.GatewayAPIStatus.Services,
// model/gatewayservice.go), in the same passes as the status, under the
// same Lease, with the same backoff after a failed write.
//
// An object is ours when its controller ownerReference names the Gateway
// by UID (model.OwnedByGateway), never by its labels. One that is not ours
// is never updated or deleted: the model already reported the clash on
// the Gateway, and the writer logs it once. An object ours and no longer
// wanted is deleted when its name is the one its Gateway's Service (or
// EndpointSlice) would have and its Gateway is still wanted, was wanted
// since this replica started, or is of one of our GatewayClasses; the
// garbage collector deletes those of a Gateway that is gone. Writes are
// compared with the source's caches first: a pass that changes nothing
// sends no request.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/restysync/restysync/agent/internal/model"
)

// GatewayServiceLookup returns the cached Services and EndpointSlices
// (nil for one that does not exist), and those labelled as Gateway
// Services' (model.GatewayServiceManagedByLabel).
type GatewayServiceLookup interface {
	Service(namespace, name string) *corev1.Service
	EndpointSlice(namespace, name string) *discoveryv1.EndpointSlice
	GatewayServiceObjects() ([]*corev1.Service, []*discoveryv1.EndpointSlice)
}

// gatewayServices is the Gateway Services part of a gatewayWriter.
type gatewayServices struct {
	lookup GatewayServiceLookup
	// known are the UIDs of the Gateways ever wanted a Service since
	// this replica started (guarded by the Writer's mu): a Gateway that
	// left our classes loses its Service.
	known map[types.UID]bool
	// clashes are the objects found not ours, logged once (loop
	// goroutine).
	clashes map[objectKey]bool
}

// noteWanted records the Gateways of services as known.
func (s *gatewayServices) noteWanted(services []model.GatewayService) {
	for _, svc := range services {
		s.known[types.UID(svc.GatewayUID)] = true
	}
}

// syncServices brings the Services and EndpointSlices of wanted to what
// it says, and deletes ours that left it.
func (g *gatewayWriter) syncServices(ctx context.Context, w *Writer, wanted []model.GatewayService, note func(objectKey, bool, error)) {
	s := g.services
	want := map[objectKey]bool{}
	gateways := map[types.UID]bool{}
	for _, svc := range wanted {
		gateways[types.UID(svc.GatewayUID)] = true
		key := objectKey{Kind: "Service", Namespace: svc.Namespace, Name: svc.Name}
		want[key] = true
		ok, err := g.ensureService(ctx, w, key, svc)
		note(key, ok, err)
		for _, slice := range svc.Slices {
			key := objectKey{Kind: "EndpointSlice", Namespace: svc.Namespace, Name: slice.Name}
			want[key] = true
			ok, err := g.ensureSlice(ctx, w, key, svc, slice)
			note(key, ok, err)
		}
	}
	services, endpointSlices := s.lookup.GatewayServiceObjects()
	var objects []metav1.Object
	for _, o := range services {
		objects = append(objects, o)
	}
	for _, o := range endpointSlices {
		objects = append(objects, o)
	}
	owners := map[types.UID]bool{} // of the objects that stay
	for _, obj := range objects {
		key := objectKey{Kind: "Service", Namespace: obj.GetNamespace(), Name: obj.GetName()}
		if _, slice := obj.(*discoveryv1.EndpointSlice); slice {
			key.Kind = "EndpointSlice"
		}
		ref := model.ControllerGateway(obj)
		if want[key] || ref == nil {
			continue
		}
		w.mu.Lock()
		known := s.known[ref.UID]
		w.mu.Unlock()
		if !gatewayObjectName(key, ref.Name) || !(gateways[ref.UID] || known || g.ourGateway(key.Namespace, ref)) {
			owners[ref.UID] = true
			continue
		}
		err := g.deleteGatewayObject(ctx, key, obj.GetUID())
		note(key, err == nil, err)
		if err != nil {
			owners[ref.UID] = true
			continue
		}
		w.logger.Info("deleted a Gateway's object it no longer needs", "object", key.String(), "gateway", key.Namespace+"/"+ref.Name)
	}
	// Forget the Gateways no longer wanted and left with nothing of ours.
	w.mu.Lock()
	for uid := range s.known {
		if !gateways[uid] && !owners[uid] {
			delete(s.known, uid)
		}
	}
	w.mu.Unlock()
}

// gatewayObjectName says whether key is the name the Service (or an
// EndpointSlice) of the Gateway named gateway would have.
func gatewayObjectName(key objectKey, gateway string) bool {
	name := model.GatewayServiceName(gateway)
	if key.Kind == "Service" {
		return key.Name == name
	}
	family, ok := strings.CutPrefix(key.Name, name+"-")
	return ok && (family == "ipv4" || family == "ipv6")
}

// ourGateway says whether ref names a Gateway that exists (with that
// UID) in one of our GatewayClasses.
func (g *gatewayWriter) ourGateway(namespace string, ref *metav1.OwnerReference) bool {
	if g.lookup == nil {
		return false
	}
	gw := g.lookup.Gateway(namespace, ref.Name)
	if gw == nil || gw.UID != ref.UID {
		return false
	}
	class := g.lookup.GatewayClass(string(gw.Spec.GatewayClassName))
	return class != nil && string(class.Spec.ControllerName) == g.controller
}

// ensureService creates or updates the Service of want, and reports
// whether it wrote.
func (g *gatewayWriter) ensureService(ctx context.Context, w *Writer, key objectKey, want model.GatewayService) (bool, error) {
	api := g.client.Services(key.Namespace)
	next := &corev1.Service{ObjectMeta: gatewayObjectMeta(want, key.Name, want.Labels),
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Ports: servicePorts(want.Ports)}}
	cur := g.services.lookup.Service(key.Namespace, key.Name)
	rctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	switch {
	case cur == nil:
		_, err := api.Create(rctx, next, metav1.CreateOptions{FieldManager: FieldManager})
		return created(err)
	case !model.OwnedByGateway(cur, types.UID(want.GatewayUID)):
		g.notOurs(w, key, want)
		return false, nil
	}
	delete(g.services.clashes, key)
	update := cur.DeepCopy()
	update.Labels, update.Annotations = next.Labels, next.Annotations
	update.Spec.Selector, update.Spec.Ports = nil, next.Spec.Ports
	if sameMeta(cur.ObjectMeta, update.ObjectMeta) && len(cur.Spec.Selector) == 0 && sameServicePorts(cur.Spec.Ports, update.Spec.Ports) {
		return false, nil
	}
	_, err := api.Update(rctx, update, metav1.UpdateOptions{FieldManager: FieldManager})
	return updated(err)
}

// ensureSlice creates or updates one EndpointSlice of want, and reports
// whether it wrote.
func (g *gatewayWriter) ensureSlice(ctx context.Context, w *Writer, key objectKey, want model.GatewayService, slice model.GatewayServiceSlice) (bool, error) {
	api := g.client.EndpointSlices(key.Namespace)
	labels := maps.Clone(want.Labels)
	labels[discoveryv1.LabelServiceName] = want.Name
	labels[discoveryv1.LabelManagedBy] = model.GatewayServiceSliceManager
	next := &discoveryv1.EndpointSlice{ObjectMeta: gatewayObjectMeta(want, key.Name, labels),
		AddressType: discoveryv1.AddressType(slice.AddressType), Endpoints: endpoints(slice.Addresses), Ports: slicePorts(want.Ports)}
	cur := g.services.lookup.EndpointSlice(key.Namespace, key.Name)
	rctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	switch {
	case cur == nil:
		_, err := api.Create(rctx, next, metav1.CreateOptions{FieldManager: FieldManager})
		return created(err)
	case !model.OwnedByGateway(cur, types.UID(want.GatewayUID)) || cur.AddressType != next.AddressType:
		g.notOurs(w, key, want)
		return false, nil
	}
	delete(g.services.clashes, key)
	update := cur.DeepCopy()
	update.Labels, update.Annotations = next.Labels, next.Annotations
	update.Endpoints, update.Ports = next.Endpoints, next.Ports
	if sameMeta(cur.ObjectMeta, update.ObjectMeta) && apiequality.Semantic.DeepEqual(cur.Endpoints, update.Endpoints) && apiequality.Semantic.DeepEqual(cur.Ports, update.Ports) {
		return false, nil
	}
	_, err := api.Update(rctx, update, metav1.UpdateOptions{FieldManager: FieldManager})
	return updated(err)
}

// notOurs logs, once while it lasts, an object of want's name that is not
// its Gateway's.
func (g *gatewayWriter) notOurs(w *Writer, key objectKey, want model.GatewayService) {
	if g.services.clashes[key] {
		return
	}
	g.services.clashes[key] = true
	w.logger.Warn("a Gateway's Service or EndpointSlice name is taken by an object it does not own: left alone",
		"object", key.String(), "gateway", want.Namespace+"/"+want.Gateway)
}

// deleteGatewayObject deletes the object key if its UID is still uid.
func (g *gatewayWriter) deleteGatewayObject(ctx context.Context, key objectKey, uid types.UID) error {
	rctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	opts := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}
	var err error
	if key.Kind == "Service" {
		err = g.client.Services(key.Namespace).Delete(rctx, key.Name, opts)
	} else {
		err = g.client.EndpointSlices(key.Namespace).Delete(rctx, key.Name, opts)
	}
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) { // gone, or replaced by another
		return nil
	}
	return err
}

// created reads a create's error: one that exists already is no error
// (the cache is behind, or the next build reports the clash).
func created(err error) (bool, error) {
	if apierrors.IsAlreadyExists(err) {
		return false, nil
	}
	return err == nil, err
}

// updated reads an update's error: a conflict is retried by the next
// pass, once the cache has the object as it is.
func updated(err error) (bool, error) {
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("writing: %w", err)
	}
	return true, nil
}

// gatewayObjectMeta is the metadata of a Service or EndpointSlice of
// want: its labels, annotations and the Gateway as controller.
func gatewayObjectMeta(want model.GatewayService, name string, labels map[string]string) metav1.ObjectMeta {
	controller := true
	return metav1.ObjectMeta{
		Namespace: want.Namespace, Name: name,
		Labels: labels, Annotations: maps.Clone(want.Annotations),
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: gatewayv1.GroupVersion.String(), Kind: "Gateway",
			Name: want.Gateway, UID: types.UID(want.GatewayUID), Controller: &controller,
		}},
	}
}

// sameMeta says whether a and b have the same labels and annotations
// (nil and empty alike).
func sameMeta(a, b metav1.ObjectMeta) bool {
	return maps.Equal(a.Labels, b.Labels) && maps.Equal(a.Annotations, b.Annotations)
}

func servicePorts(ports []int32) []corev1.ServicePort {
	out := make([]corev1.ServicePort, 0, len(ports))
	for _, p := range ports {
		out = append(out, corev1.ServicePort{Name: model.GatewayServicePortName(p), Protocol: corev1.ProtocolTCP,
			Port: p, TargetPort: intstr.FromInt32(p)})
	}
	return out
}

// sameServicePorts compares what servicePorts sets of each port.
func sameServicePorts(a, b []corev1.ServicePort) bool {
	return slices.EqualFunc(a, b, func(x, y corev1.ServicePort) bool {
		return x.Name == y.Name && x.Protocol == y.Protocol && x.Port == y.Port && x.TargetPort == y.TargetPort
	})
}

func slicePorts(ports []int32) []discoveryv1.EndpointPort {
	out := make([]discoveryv1.EndpointPort, 0, len(ports))
	for _, p := range ports {
		name, protocol, port := model.GatewayServicePortName(p), corev1.ProtocolTCP, p
		out = append(out, discoveryv1.EndpointPort{Name: &name, Protocol: &protocol, Port: &port})
	}
	return out
}

func endpoints(addresses []string) []discoveryv1.Endpoint {
	out := make([]discoveryv1.Endpoint, 0, len(addresses))
	for _, a := range addresses {
		ready := true
		out = append(out, discoveryv1.Endpoint{Addresses: []string{a}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}})
	}
	return out
}
