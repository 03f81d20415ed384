package events

// Events on Gateway API objects. The sync loop holds no UID of them, so the Event is queued
// with a reference by kind, namespace and name, and the sender (which may
// wait on the API server) reads the object's UID just before it creates
// the Event: `kubectl describe` finds an object's Events by UID. An object
// gone by then has its Event dropped.

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/restysync/restysync/agent/internal/model"
)

// gatewayAPIVersion is the apiVersion of the Gateway API objects Events
// refer to.
var gatewayAPIVersion = gatewayv1.GroupVersion.String()

// gatewayKinds are the Problem kinds of Gateway API objects that get
// Events.
var gatewayKinds = map[string]bool{"GatewayClass": true, "Gateway": true, "HTTPRoute": true, "GRPCRoute": true, "TLSRoute": true, "ListenerSet": true, "BackendTLSPolicy": true}

// GatewayAPIProblems emits a Warning Event on the GatewayClass, Gateway
// or HTTPRoute of each problem of those kinds that was not in the previous
// call, as Problems does for Ingresses. It does nothing on a Recorder
// without Options.GatewayAPI.
func (r *Recorder) GatewayAPIProblems(problems []model.Problem) {
	if !r.gatewayAPI {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	next := map[model.Problem]bool{}
	for _, p := range problems {
		if !gatewayKinds[p.Kind] {
			continue
		}
		if !r.gatewayProblems[p] && !next[p] {
			ref := &corev1.ObjectReference{APIVersion: gatewayAPIVersion, Kind: p.Kind,
				Namespace: p.Namespace, Name: p.Name, FieldPath: fieldPath(p.Reason)}
			r.emit(ref, corev1.EventTypeWarning, ReasonProblem, p.Reason)
			r.logger.Debug("event", "object", p.Object(), "type", corev1.EventTypeWarning, "note", p.Reason)
		}
		next[p] = true
	}
	r.gatewayProblems = next
}

// resolveGatewayAPI fills in the UID and resourceVersion of a reference
// to a Gateway API object without one; false if the object is gone.
func (r *Recorder) resolveGatewayAPI(ctx context.Context, ref *corev1.ObjectReference) (bool, error) {
	if ref.APIVersion != gatewayAPIVersion || ref.UID != "" || !r.gatewayAPI {
		return true, nil
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	var obj metav1.Object
	var err error
	switch ref.Kind {
	case "GatewayClass":
		obj, err = r.client.GatewayClasses().Get(ctx, ref.Name, metav1.GetOptions{})
	case "Gateway":
		obj, err = r.client.Gateways(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	case "HTTPRoute":
		obj, err = r.client.HTTPRoutes(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	case "GRPCRoute":
		obj, err = r.client.GRPCRoutes(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	case "TLSRoute":
		obj, err = r.client.TLSRoutes(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	case "ListenerSet":
		obj, err = r.client.ListenerSets(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	case "BackendTLSPolicy":
		obj, err = r.client.BackendTLSPolicies(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	default:
		return false, fmt.Errorf("no Events on kind %s", ref.Kind)
	}
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	ref.UID, ref.ResourceVersion = obj.GetUID(), obj.GetResourceVersion()
	return true, nil
}
