package model

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
)

// Which Ingresses restysync serves (the class decision), as ingress-nginx
// decides it (internal/ingress/controller/store/store.go, GetIngressClass):
// spec.ingressClassName, when set, decides alone, and only through an
// IngressClass of that name whose controller is ours; without the field,
// the legacy annotation kubernetes.io/ingress.class decides by name; an
// Ingress with neither is ours when our IngressClass is the default one,
// or with WatchWithoutClass when no other IngressClass is the default.
//
// The field winning over the annotation is also the Kubernetes API's rule:
// the API server refuses to create an Ingress whose annotation differs from
// its field. An older Ingress updated to carry both is warned about (a
// Problem), since a controller that reads the annotation first would claim
// it too. Every decision not to serve says why (Model.NotServed), so that
// inspect answers "why is my Ingress not served?" when the class is why.

// NotServed is an Ingress restysync leaves to another controller, and why.
type NotServed struct {
	// Ingress is "namespace/name".
	Ingress string
	// Reason is a sentence for a human ("class nginx is not restysync's
	// (controller k8s.io/ingress-nginx)").
	Reason string
}

// ClassDecision is whether restysync serves an Ingress.
type ClassDecision struct {
	Served bool
	// NotServed is why it is not served; "" when it is.
	NotServed string
	// TwoClasses is the warning for an Ingress whose annotation
	// kubernetes.io/ingress.class names another class than its
	// spec.ingressClassName, when either is ours; "" otherwise.
	TwoClasses string
}

// classes is what the decision reads of a Snapshot.
type classes struct {
	ours              string
	byName            map[string]*networkingv1.IngressClass
	weAreDefault      bool
	otherDefault      string // the name of another default IngressClass, "" if none
	watchWithoutClass bool
}

func newClasses(s Snapshot) classes {
	c := classes{ours: s.IngressClass, byName: make(map[string]*networkingv1.IngressClass, s.IngressClasses.Len()),
		watchWithoutClass: s.WatchWithoutClass}
	for class := range s.IngressClasses.All() {
		c.byName[class.Name] = class
		if class.Annotations[networkingv1.AnnotationIsDefaultIngressClass] != "true" {
			continue
		}
		if class.Name == s.IngressClass && class.Spec.Controller == ControllerName {
			c.weAreDefault = true
		} else if c.otherDefault == "" || class.Name < c.otherDefault {
			c.otherDefault = class.Name
		}
	}
	return c
}

// DecideClass returns the class decision of s for one Ingress.
func DecideClass(s Snapshot) func(*networkingv1.Ingress) ClassDecision {
	return newClasses(s).decide
}

func (c classes) decide(ing *networkingv1.Ingress) ClassDecision {
	annotation := ing.Annotations[legacyClassAnnotation]
	if field := ing.Spec.IngressClassName; field != nil && *field != "" {
		d := c.byField(*field)
		if annotation != "" && annotation != *field && (annotation == c.ours || *field == c.ours) {
			d.TwoClasses = c.twoClasses(*field, annotation, d.Served)
		}
		return d
	}
	if annotation != "" {
		if annotation == c.ours {
			return ClassDecision{Served: true}
		}
		return ClassDecision{NotServed: fmt.Sprintf("annotation %s names class %s, not %s%s",
			legacyClassAnnotation, clip(annotation), c.ours, c.controllerOf(annotation))}
	}
	switch {
	case c.weAreDefault:
		return ClassDecision{Served: true}
	case c.otherDefault != "":
		return ClassDecision{NotServed: fmt.Sprintf("names no class, and the default IngressClass is %s%s",
			c.otherDefault, c.controllerOf(c.otherDefault))}
	case c.watchWithoutClass:
		return ClassDecision{Served: true}
	}
	return ClassDecision{NotServed: fmt.Sprintf("names no class: restysync serves those only with --watch-ingress-without-class, "+
		"or when IngressClass %s is the default one", c.ours)}
}

// byField decides by spec.ingressClassName.
func (c classes) byField(name string) ClassDecision {
	class := c.byName[name]
	switch {
	case name != c.ours:
		return ClassDecision{NotServed: fmt.Sprintf("class %s is not restysync's%s", clip(name), c.controllerOf(name))}
	case class == nil:
		return ClassDecision{NotServed: fmt.Sprintf("class %s has no IngressClass: create one with controller %s", name, ControllerName)}
	case class.Spec.Controller != ControllerName:
		return ClassDecision{NotServed: fmt.Sprintf("IngressClass %s has controller %s, not restysync's %s",
			name, clip(class.Spec.Controller), ControllerName)}
	}
	return ClassDecision{Served: true}
}

// controllerOf says whose class name is, for a reason: " (controller X)",
// or " (no IngressClass of that name)".
func (c classes) controllerOf(name string) string {
	if class := c.byName[name]; class != nil {
		return " (controller " + clip(class.Spec.Controller) + ")"
	}
	return " (no IngressClass of that name)"
}

func (c classes) twoClasses(field, annotation string, served bool) string {
	verdict := "restysync serves it, and a controller that reads the annotation first would serve it too"
	if !served {
		verdict = "restysync does not serve it"
	}
	return fmt.Sprintf("spec.ingressClassName: %q and the annotation %s %q name two classes; the field wins, "+
		"as in ingress-nginx and the Kubernetes API: %s; remove the annotation",
		clip(field), legacyClassAnnotation, clip(annotation), verdict)
}

// checkClasses raises a Problem for an IngressClass named like ours
// (s.IngressClass) whose controller is not ours: every Ingress of that
// class is left unserved.
func (b *builder) checkClasses(s Snapshot) {
	for class := range s.IngressClasses.All() {
		if class.Name == s.IngressClass && class.Spec.Controller != ControllerName {
			b.problem("IngressClass", "", class.Name, fmt.Sprintf("spec.controller is %q, not restysync's %q: "+
				"the Ingresses of class %s are not served; set the controller to %s, or run restysync with another --ingress-class",
				clip(class.Spec.Controller), ControllerName, class.Name, ControllerName))
		}
	}
}

// ourIngresses returns the Ingresses of our class, oldest first (ties
// broken by namespace and name), so that "the oldest wins" is "the first
// wins". It records the others in notServed, with why, and raises a
// Problem for each that names two classes.
func (b *builder) ourIngresses(s Snapshot) []*networkingv1.Ingress {
	decide := DecideClass(s)
	ours := make([]*networkingv1.Ingress, 0, s.Ingresses.Len())
	for ing := range s.Ingresses.All() {
		d := decide(ing)
		if d.TwoClasses != "" {
			b.ingressProblem(ing, d.TwoClasses)
		}
		if d.Served {
			ours = append(ours, ing)
			continue
		}
		b.notServed = append(b.notServed, NotServed{Ingress: ing.Namespace + "/" + ing.Name, Reason: d.NotServed})
	}
	slices.SortFunc(ours, func(a, b *networkingv1.Ingress) int {
		return cmp.Or(
			a.CreationTimestamp.Time.Compare(b.CreationTimestamp.Time),
			strings.Compare(a.Namespace, b.Namespace),
			strings.Compare(a.Name, b.Name),
		)
	})
	slices.SortFunc(b.notServed, func(a, b NotServed) int { return strings.Compare(a.Ingress, b.Ingress) })
	return ours
}
