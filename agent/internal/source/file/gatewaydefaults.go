package file

import gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

// The API server fills the Gateway API's defaults (its CRDs' schema) into
// an object before anyone reads it; the file source fills the same ones,
// as it sets the namespace kubectl would, so that the model reads a Gateway
// or an HTTPRoute alike from either source. Only the defaults of the
// fields the standard channel's Gateways and HTTPRoutes route by are
// filled; status is not.

// defaultGateway fills the defaults of a Gateway's listeners and addresses.
func defaultGateway(gw *gatewayv1.Gateway) {
	for i := range gw.Spec.Addresses {
		if gw.Spec.Addresses[i].Type == nil {
			gw.Spec.Addresses[i].Type = to(gatewayv1.IPAddressType)
		}
	}
	for i := range gw.Spec.Listeners {
		defaultListener(&gw.Spec.Listeners[i])
	}
}

// defaultListenerSet fills the defaults of a ListenerSet's parentRef and
// listeners (a ListenerEntry has a Gateway listener's fields).
func defaultListenerSet(set *gatewayv1.ListenerSet) {
	ref := &set.Spec.ParentRef
	if ref.Group == nil {
		ref.Group = to(gatewayv1.Group(gatewayv1.GroupName))
	}
	if ref.Kind == nil {
		ref.Kind = to(gatewayv1.Kind("Gateway"))
	}
	for i := range set.Spec.Listeners {
		defaultListener((*gatewayv1.Listener)(&set.Spec.Listeners[i]))
	}
}

// defaultListener fills the defaults of one listener.
func defaultListener(l *gatewayv1.Listener) {
	{
		if l.AllowedRoutes == nil {
			l.AllowedRoutes = &gatewayv1.AllowedRoutes{}
		}
		if l.AllowedRoutes.Namespaces == nil {
			l.AllowedRoutes.Namespaces = &gatewayv1.RouteNamespaces{}
		}
		if l.AllowedRoutes.Namespaces.From == nil {
			l.AllowedRoutes.Namespaces.From = to(gatewayv1.NamespacesFromSame)
		}
		for j := range l.AllowedRoutes.Kinds {
			if l.AllowedRoutes.Kinds[j].Group == nil {
				l.AllowedRoutes.Kinds[j].Group = to(gatewayv1.Group(gatewayv1.GroupName))
			}
		}
		if l.TLS == nil {
			return
		}
		if l.TLS.Mode == nil {
			l.TLS.Mode = to(gatewayv1.TLSModeTerminate)
		}
		for j := range l.TLS.CertificateRefs {
			ref := &l.TLS.CertificateRefs[j]
			if ref.Group == nil {
				ref.Group = to(gatewayv1.Group(""))
			}
			if ref.Kind == nil {
				ref.Kind = to(gatewayv1.Kind("Secret"))
			}
		}
	}
}

// defaultHTTPRoute fills the defaults of an HTTPRoute's parentRefs and
// rules: a rule without matches matches every path, a path match without a
// type is a prefix, a backendRef is a Service of weight 1.
func defaultHTTPRoute(route *gatewayv1.HTTPRoute) {
	defaultParentRefs(route.Spec.ParentRefs)
	if route.Spec.Rules == nil {
		route.Spec.Rules = []gatewayv1.HTTPRouteRule{{}}
	}
	for i := range route.Spec.Rules {
		rule := &route.Spec.Rules[i]
		if rule.Matches == nil {
			rule.Matches = []gatewayv1.HTTPRouteMatch{{}}
		}
		for j := range rule.Matches {
			defaultMatch(&rule.Matches[j])
		}
		defaultFilters(rule.Filters)
		for j := range rule.BackendRefs {
			ref := &rule.BackendRefs[j]
			defaultBackendRef(&ref.BackendObjectReference)
			if ref.Weight == nil {
				ref.Weight = to[int32](1)
			}
			defaultFilters(ref.Filters)
		}
	}
}

// defaultParentRefs fills the defaults of a route's parentRefs.
func defaultParentRefs(refs []gatewayv1.ParentReference) {
	for i := range refs {
		defaultParentRef(&refs[i])
	}
}

// defaultParentRef sets a parentRef's group and kind as the CRD does.
func defaultParentRef(ref *gatewayv1.ParentReference) {
	if ref.Group == nil {
		ref.Group = to(gatewayv1.Group(gatewayv1.GroupName))
	}
	if ref.Kind == nil {
		ref.Kind = to(gatewayv1.Kind("Gateway"))
	}
}

func defaultMatch(m *gatewayv1.HTTPRouteMatch) {
	if m.Path == nil {
		m.Path = &gatewayv1.HTTPPathMatch{}
	}
	if m.Path.Type == nil {
		m.Path.Type = to(gatewayv1.PathMatchPathPrefix)
	}
	if m.Path.Value == nil {
		m.Path.Value = to("/")
	}
	for i := range m.Headers {
		if m.Headers[i].Type == nil {
			m.Headers[i].Type = to(gatewayv1.HeaderMatchExact)
		}
	}
	for i := range m.QueryParams {
		if m.QueryParams[i].Type == nil {
			m.QueryParams[i].Type = to(gatewayv1.QueryParamMatchExact)
		}
	}
}

func defaultFilters(filters []gatewayv1.HTTPRouteFilter) {
	for i := range filters {
		f := &filters[i]
		if f.RequestRedirect != nil && f.RequestRedirect.StatusCode == nil {
			f.RequestRedirect.StatusCode = to(302)
		}
		if f.RequestMirror != nil {
			defaultBackendRef(&f.RequestMirror.BackendRef)
		}
	}
}

func defaultBackendRef(ref *gatewayv1.BackendObjectReference) {
	if ref.Group == nil {
		ref.Group = to(gatewayv1.Group(""))
	}
	if ref.Kind == nil {
		ref.Kind = to(gatewayv1.Kind("Service"))
	}
}

// to returns a pointer to a copy of v.
func to[T any](v T) *T { return &v }
