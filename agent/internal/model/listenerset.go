package model

import (
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// ListenerSets: more listeners for a Gateway, from other objects (often
// other tenants' namespaces), when the Gateway's spec.allowedListeners lets
// them attach. Each listener of an attached ListenerSet becomes a listener
// of its parent Gateway (a listenerState whose set is the ListenerSet), so
// routes, fronts, certificates, listener isolation, render, the router and
// plan treat it as one of the Gateway's own; only which routes attach to it
// (those whose parentRef names the ListenerSet, never the Gateway) and
// where its status goes differ.
//
// Precedence is the spec's: the Gateway's own listeners, then ListenerSets
// oldest first, then by namespace/name. A ListenerSet listener that shares
// a port with an earlier listener of another protocol, or of the same
// protocol and hostname, is Conflicted and not served; the earlier one
// keeps serving. So a ListenerSet can never take a port or hostname away
// from the Gateway's own listeners or an older ListenerSet's.

// maxMergedListeners bounds the listeners of one Gateway with those of
// its ListenerSets: past it, ListenerSet listeners are not accepted
// (TooManyListeners), whatever the number of ListenerSets a tenant makes.
const maxMergedListeners = 1024

// The ListenerSet conditions' reasons that Gateways do not share.
const (
	reasonNotAllowed          = "NotAllowed"
	reasonParentNotAccepted   = "ParentNotAccepted"
	reasonParentNotProgrammed = "ParentNotProgrammed"
	reasonTooManyListeners    = "TooManyListeners"
)

// listenerSetState is one ListenerSet whose parentRef names one of our
// Gateways.
type listenerSetState struct {
	ls      *gatewayv1.ListenerSet
	id      string // "namespace/name"
	gateway *gatewayState
	// accepted is the ListenerSet's Accepted condition; when false its
	// reason is Programmed's too.
	accepted  Condition
	listeners []*listenerState
}

// processListenerSets attaches the ListenerSets of our Gateways in the
// spec's precedence and checks their listeners.
func (p *gatewayProcessor) processListenerSets() {
	var sets []*gatewayv1.ListenerSet
	for ls := range p.source.ListenerSets.All() {
		if p.parentOfListenerSet(ls) == nil {
			continue // not ours to read or write
		}
		if len(validation.IsDNS1123Label(ls.Namespace)) > 0 || len(validation.IsDNS1123Subdomain(ls.Name)) > 0 {
			p.problem(kindListenerSet, ls.Namespace, ls.Name, fmt.Sprintf("metadata: namespace %q or name %q is not a Kubernetes name; the ListenerSet is left out", clip(ls.Namespace), clip(ls.Name)))
			continue
		}
		sets = append(sets, ls)
	}
	slices.SortFunc(sets, compareObjects[*gatewayv1.ListenerSet])
	for _, ls := range sets {
		s := &listenerSetState{ls: ls, id: ls.Namespace + "/" + ls.Name, gateway: p.parentOfListenerSet(ls)}
		s.gateway.sets = append(s.gateway.sets, s)
		p.listenerSets = append(p.listenerSets, s)
		p.setByName[namespacedName{ls.Namespace, ls.Name}] = s
		p.checkListenerSet(s)
	}
}

// parentOfListenerSet returns the Gateway of ours ls's parentRef names,
// nil when it names none.
func (p *gatewayProcessor) parentOfListenerSet(ls *gatewayv1.ListenerSet) *gatewayState {
	ref := ls.Spec.ParentRef
	if ref.Group != nil && *ref.Group != gatewayGroup || ref.Kind != nil && *ref.Kind != kindGateway {
		return nil
	}
	namespace := ls.Namespace
	if ref.Namespace != nil && *ref.Namespace != "" {
		namespace = string(*ref.Namespace)
	}
	return p.byName[namespacedName{namespace, string(ref.Name)}]
}

func (p *gatewayProcessor) listenerSetProblem(s *listenerSetState, reason string) {
	p.problem(kindListenerSet, s.ls.Namespace, s.ls.Name, reason)
}

// checkListenerSet decides whether s attaches to its Gateway, and checks
// its listeners after every listener that precedes them.
func (p *gatewayProcessor) checkListenerSet(s *listenerSetState) {
	g := s.gateway
	notAccepted := func(reason, msg string) {
		p.listenerSetProblem(s, msg+"; the ListenerSet is not served")
		s.accepted = condition(condAccepted, false, reason, msg)
	}
	switch {
	case !p.allowsListenerSet(g, s.ls.Namespace):
		notAccepted(reasonNotAllowed, fmt.Sprintf("Gateway %s does not allow ListenerSets from namespace %s (spec.allowedListeners)", g.id, s.ls.Namespace))
		return
	case !g.accepted.Status:
		notAccepted(reasonParentNotAccepted, fmt.Sprintf("Gateway %s is not accepted", g.id))
		return
	case len(s.ls.Spec.Listeners) == 0 || len(s.ls.Spec.Listeners) > maxListeners:
		notAccepted(reasonInvalid, fmt.Sprintf("spec.listeners: has %d listeners; from 1 to %d are allowed", len(s.ls.Spec.Listeners), maxListeners))
		return
	}
	names := make(map[gatewayv1.SectionName]bool, len(s.ls.Spec.Listeners))
	valid := 0
	for i := range s.ls.Spec.Listeners {
		// A ListenerEntry has a Gateway listener's fields, in its order.
		spec := (*gatewayv1.Listener)(&s.ls.Spec.Listeners[i])
		field := fmt.Sprintf("spec.listeners[%d]", i)
		if names[spec.Name] {
			p.listenerSetProblem(s, fmt.Sprintf("%s (%q): another listener of the ListenerSet has this name; the listener is left out", field, clip(string(spec.Name))))
			continue
		}
		names[spec.Name] = true
		l := p.checkSetListener(g, s, spec, field)
		s.listeners = append(s.listeners, l)
		g.listeners = append(g.listeners, l)
		if l.programmed() {
			valid++
		}
	}
	switch invalid := len(s.listeners) - valid; {
	case valid == 0:
		s.accepted = condition(condAccepted, false, reasonListenersNotValid, "no listener is valid")
		p.listenerSetProblem(s, "spec.listeners: no listener is valid; the ListenerSet is not served")
		return
	case invalid > 0:
		s.accepted = condition(condAccepted, true, reasonListenersNotValid, fmt.Sprintf("%d of %d listeners are not valid", invalid, len(s.listeners)))
	default:
		s.accepted = condition(condAccepted, true, reasonAccepted, "")
	}
	p.serveListeners(g, s.listeners)
}

// checkSetListener checks one listener of s: first against the listeners
// that precede it on its port (a conflict is the listener's only
// condition that matters then), then on its own as a Gateway's.
func (p *gatewayProcessor) checkSetListener(g *gatewayState, s *listenerSetState, spec *gatewayv1.Listener, field string) *listenerState {
	if len(g.listeners) >= maxMergedListeners {
		l := &listenerState{set: s, spec: spec, kinds: []string{},
			resolved:   condition(condResolvedRefs, true, reasonResolvedRefs, ""),
			conflicted: condition(condConflicted, false, reasonNoConflicts, "")}
		msg := fmt.Sprintf("Gateway %s has %d listeners with those of its ListenerSets, the most restysync serves", g.id, maxMergedListeners)
		p.listenerSetProblem(s, fmt.Sprintf("%s (%q): %s; the listener is not served", field, clip(string(spec.Name)), msg))
		l.accepted = condition(condAccepted, false, reasonTooManyListeners, msg)
		return l
	}
	if reason, msg := conflictBefore(g, spec); reason != "" {
		l := &listenerState{set: s, spec: spec, kinds: []string{},
			resolved: condition(condResolvedRefs, true, reasonResolvedRefs, "")}
		p.listenerSetProblem(s, fmt.Sprintf("%s (%q): %s; the listener is not served", field, clip(string(spec.Name)), msg))
		l.accepted = condition(condAccepted, false, reason, msg)
		l.conflicted = condition(condConflicted, true, reason, msg)
		return l
	}
	return p.checkListener(g, s, spec, field)
}

// conflictBefore returns the reason and message of spec's conflict with
// a served listener of g before it (the Gateway's own, an older
// ListenerSet's, an earlier one of its own ListenerSet): one on the same
// port with another protocol, or with the same protocol and hostname; ""
// when there is none. The message names no other ListenerSet: a tenant
// learns only that the port or hostname is taken.
func conflictBefore(g *gatewayState, spec *gatewayv1.Listener) (reason, msg string) {
	hostname := ""
	if spec.Hostname != nil {
		hostname = string(*spec.Hostname)
	}
	for _, o := range g.listeners {
		if !o.accepted.Status || o.conflicted.Status || o.spec.Port != spec.Port {
			continue
		}
		holder := "the Gateway"
		if o.set != nil {
			holder = "an earlier ListenerSet listener"
		}
		switch {
		case o.spec.Protocol != spec.Protocol:
			return reasonProtocolConflict, fmt.Sprintf("port %d is already served with protocol %s by %s", spec.Port, o.spec.Protocol, holder)
		case o.hostname == hostname:
			return reasonHostnameConflict, fmt.Sprintf("port %d and hostname %q are already served by %s", spec.Port, clip(hostname), holder)
		}
	}
	return "", ""
}

// allowsListenerSet says whether g's spec.allowedListeners lets
// ListenerSets of namespace attach (by default none may).
func (p *gatewayProcessor) allowsListenerSet(g *gatewayState, namespace string) bool {
	al := g.gw.Spec.AllowedListeners
	if al == nil || al.Namespaces == nil || al.Namespaces.From == nil {
		return false
	}
	switch *al.Namespaces.From {
	case gatewayv1.NamespacesFromAll:
		return true
	case gatewayv1.NamespacesFromSame:
		return namespace == g.gw.Namespace
	case gatewayv1.NamespacesFromSelector:
		if al.Namespaces.Selector == nil {
			return false
		}
		s, err := metav1.LabelSelectorAsSelector(al.Namespaces.Selector)
		return err == nil && s.Matches(labels.Set(p.namespaceLabelsOf(namespace)))
	}
	return false // None, or a value the CRD does not allow
}

// listenerSetStatus is s's status as Build found it.
func (p *gatewayProcessor) listenerSetStatus(s *listenerSetState) GatewayStatus {
	st := GatewayStatus{Namespace: s.ls.Namespace, Name: s.ls.Name, Generation: s.ls.Generation}
	anyProgrammed := false
	for _, l := range s.listeners {
		ls, programmed := listenerStatus(s.gateway, l)
		anyProgrammed = anyProgrammed || programmed
		st.Listeners = append(st.Listeners, ls)
	}
	programmed := condition(condProgrammed, true, reasonProgrammed, "")
	switch {
	case !s.accepted.Status:
		programmed = condition(condProgrammed, false, s.accepted.Reason, s.accepted.Message)
	case !s.gateway.served() || !anyProgrammed:
		programmed = condition(condProgrammed, false, reasonParentNotProgrammed, fmt.Sprintf("Gateway %s is not served", s.gateway.id))
	}
	st.Conditions = []Condition{s.accepted, programmed}
	return st
}
