package source

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// ShareFewValued replaces, in obj, each string that takes few values from
// object to object by share of it: a Service's port names, protocols and
// target port names; an EndpointSlice's address type and its ports' names
// and protocols; an Ingress's class, path types and backend port names.
// Decoding gives each object its own copy of each; share returns one copy
// for all (the file source's bounded table, the kube source's unique
// handles), so what is shared is chosen here once for both. Names, hosts
// and addresses are mostly an object's own and are left alone. obj must be
// the caller's own, not yet handed out (it is changed in place).
func ShareFewValued(obj any, share func(string) string) {
	switch o := obj.(type) {
	case *corev1.Service:
		for i := range o.Spec.Ports {
			p := &o.Spec.Ports[i]
			p.Name, p.Protocol = share(p.Name), corev1.Protocol(share(string(p.Protocol)))
			p.TargetPort.StrVal = share(p.TargetPort.StrVal)
		}
	case *discoveryv1.EndpointSlice:
		o.AddressType = discoveryv1.AddressType(share(string(o.AddressType)))
		for i := range o.Ports {
			p := &o.Ports[i]
			if p.Name != nil {
				*p.Name = share(*p.Name)
			}
			if p.Protocol != nil {
				*p.Protocol = corev1.Protocol(share(string(*p.Protocol)))
			}
		}
	case *networkingv1.Ingress:
		if o.Spec.IngressClassName != nil {
			*o.Spec.IngressClassName = share(*o.Spec.IngressClassName)
		}
		for i := range o.Spec.Rules {
			if http := o.Spec.Rules[i].HTTP; http != nil {
				for j := range http.Paths {
					p := &http.Paths[j]
					if p.PathType != nil {
						*p.PathType = networkingv1.PathType(share(string(*p.PathType)))
					}
					if s := p.Backend.Service; s != nil {
						s.Port.Name = share(s.Port.Name)
					}
				}
			}
		}
	}
}
