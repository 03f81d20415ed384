package e2e

import (
	"encoding/base64"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Manifest builders for the tests: small, readable YAML that the agent
// decodes exactly as it decodes a user's files.

const ingressClasses = `apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata:
  name: restysync
  annotations:
    ingressclass.kubernetes.io/is-default-class: "true"
spec:
  controller: restysync.io/ingress-controller
---
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata:
  name: other
spec:
  controller: example.com/other
`

// endpoint is one address of an EndpointSlice; ready "" leaves the
// condition out (which the API says counts as ready).
type endpoint struct {
	addr  string
	ready string
}

func ep(addr string) endpoint        { return endpoint{addr: addr} }
func notReady(addr string) endpoint  { return endpoint{addr: addr, ready: "false"} }
func readyTrue(addr string) endpoint { return endpoint{addr: addr, ready: "true"} }

// service returns a Service with port 80 named "http", and one EndpointSlice
// for it whose port "http" is port, with the endpoints given.
func service(name string, port int, endpoints ...endpoint) string {
	return serviceWith(name, serviceOpts{slicePort: port, endpoints: endpoints})
}

// serviceOpts are the parts of a Service manifest besides its name.
type serviceOpts struct {
	clusterIP string // spec.clusterIP; "" leaves it out
	protocol  string // the port's protocol; "" for TCP
	portName  string // default "http"
	port      int    // the Service's port; default 80
	slicePort int    // the EndpointSlice's port: where the endpoints listen
	endpoints []endpoint
}

// serviceWith returns a Service and one EndpointSlice for it.
func serviceWith(name string, o serviceOpts) string {
	if o.portName == "" {
		o.portName = "http"
	}
	if o.port == 0 {
		o.port = 80
	}
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Service\nmetadata:\n  name: %s\n  namespace: default\nspec:\n", name)
	if o.clusterIP != "" {
		fmt.Fprintf(&b, "  clusterIP: %s\n", o.clusterIP)
	}
	fmt.Fprintf(&b, "  ports:\n    - name: %s\n      port: %d\n", o.portName, o.port)
	if o.protocol != "" {
		fmt.Fprintf(&b, "      protocol: %s\n", o.protocol)
	} else {
		fmt.Fprintf(&b, "      targetPort: 8080\n")
	}
	fmt.Fprintf(&b, `---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: %[1]s-1
  namespace: default
  labels:
    kubernetes.io/service-name: %[1]s
addressType: IPv4
ports:
  - name: %[2]s
    port: %[3]d
`, name, o.portName, o.slicePort)
	if o.protocol != "" {
		fmt.Fprintf(&b, "    protocol: %s\n", o.protocol)
	}
	b.WriteString("endpoints:\n")
	if len(o.endpoints) == 0 {
		b.WriteString("  []\n")
	}
	for _, e := range o.endpoints {
		fmt.Fprintf(&b, "  - addresses: [%q]\n", e.addr)
		if e.ready != "" {
			fmt.Fprintf(&b, "    conditions:\n      ready: %s\n", e.ready)
		}
	}
	return b.String()
}

// path is one HTTP path of an Ingress rule; port is a number or a name.
type path struct {
	path, pathType, service, port string
}

func prefix(p, svc string) path { return path{p, "Prefix", svc, "80"} }
func exact(p, svc string) path  { return path{p, "Exact", svc, "http"} }
func implementationSpecific(p, svc string) path {
	return path{p, "ImplementationSpecific", svc, "80"}
}

// ingressOpts are the parts of an Ingress besides its rule.
type ingressOpts struct {
	class       string // spec.ingressClassName; "" for none
	legacyClass string // the kubernetes.io/ingress.class annotation
	created     string // metadata.creationTimestamp
	host        string
	paths       []path
	defaultSvc  string // spec.defaultBackend service (port 80)
	tls         []ingressTLS
	annotations map[string]string
}

// ingressTLS is one entry of spec.tls.
type ingressTLS struct {
	secret string
	hosts  []string
}

func ingress(name string, o ingressOpts) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: %s\n  namespace: default\n", name)
	if o.created != "" {
		fmt.Fprintf(&b, "  creationTimestamp: %q\n", o.created)
	}
	annotations := maps.Clone(o.annotations)
	if o.legacyClass != "" {
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations["kubernetes.io/ingress.class"] = o.legacyClass
	}
	if len(annotations) > 0 {
		b.WriteString("  annotations:\n")
		for _, key := range slices.Sorted(maps.Keys(annotations)) {
			fmt.Fprintf(&b, "    %s: %q\n", key, annotations[key])
		}
	}
	b.WriteString("spec:\n")
	if o.class != "" {
		fmt.Fprintf(&b, "  ingressClassName: %s\n", o.class)
	}
	if o.defaultSvc != "" {
		fmt.Fprintf(&b, "  defaultBackend:\n    service:\n      name: %s\n      port:\n        number: 80\n", o.defaultSvc)
	}
	if len(o.tls) > 0 {
		b.WriteString("  tls:\n")
		for _, t := range o.tls {
			fmt.Fprintf(&b, "    - secretName: %s\n      hosts:\n", t.secret)
			for _, h := range t.hosts {
				fmt.Fprintf(&b, "        - %q\n", h)
			}
		}
	}
	if len(o.paths) > 0 {
		b.WriteString("  rules:\n")
		if o.host != "" {
			fmt.Fprintf(&b, "    - host: %q\n      http:\n", o.host)
		} else {
			b.WriteString("    - http:\n")
		}
		b.WriteString("        paths:\n")
		for _, p := range o.paths {
			port := "number: " + p.port
			if p.port[0] < '0' || p.port[0] > '9' {
				port = "name: " + p.port
			}
			fmt.Fprintf(&b, "          - path: %q\n            pathType: %s\n            backend:\n              service:\n                name: %s\n                port:\n                  %s\n",
				p.path, p.pathType, p.service, port)
		}
	}
	return b.String()
}

// tlsSecret returns a kubernetes.io/tls Secret in namespace default.
func tlsSecret(name, certPEM, keyPEM string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata:
  name: %s
  namespace: default
type: kubernetes.io/tls
data:
  tls.crt: %s
  tls.key: %s
`, name, base64.StdEncoding.EncodeToString([]byte(certPEM)), base64.StdEncoding.EncodeToString([]byte(keyPEM)))
}
