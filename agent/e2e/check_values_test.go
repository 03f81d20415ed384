package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// hostilePayload is one payload of issue 25 written as tenant B would write
// it, in a folder beside tenant A's plain Ingress on a.test.
type hostilePayload struct {
	name string
	// annotations of B's Ingress default/b on b.test; a key without "/"
	// is under nginx.ingress.kubernetes.io/.
	annotations map[string]string
	paths       []path            // B's paths; default "/" to Service web
	configMap   map[string]string // the ConfigMap default/restysync, checked with --configmap
	extra       string            // more manifests (a Service and its slices)
	raw         []byte            // B's file as these bytes, instead of the Ingress
	// What check must say: a line under the heading object ("Ingress
	// default/b") holding key, status and reason.
	object, key, status, reason string
}

// hostilePayloads are every payload issue 25 names, each as a tenant
// writes it. The one list: other tests reproduce the attacks over real
// HTTP, this one holds check to refusing each.
func hostilePayloads() []hostilePayload {
	const ingB = "Ingress default/b"
	var list []hostilePayload
	annotation := func(name, key, value, status, reason string) {
		list = append(list, hostilePayload{name: name, annotations: map[string]string{key: value},
			object: ingB, key: "nginx.ingress.kubernetes.io/" + key, status: status, reason: reason})
	}

	// Attack 1 and point 2: URLs into the pod.
	annotation("mirror-target into the config API's socket", "mirror-target", "http://unix:/some/dir/restysync.sock:/backends",
		"refused", `"http://unix:/some/dir/restysync.sock:/backends" names a unix socket, which is inside the ingress pod`)
	annotation("auth-url into the config API's socket", "auth-url", "http://unix:/x/restysync.sock:/status",
		"refused", `"http://unix:/x/restysync.sock:/status" names a unix socket, which is inside the ingress pod`)
	for _, target := range []struct{ url, reason string }{
		{"http://127.0.0.1:8080/", "is 127.0.0.1, a loopback address, which is inside the ingress pod"},
		{"http://169.254.169.254/latest/meta-data/", "is 169.254.169.254, a link-local address (the cloud metadata service"},
		{"http://0.0.0.0:8080/", "is 0.0.0.0, an unspecified address, which reaches the ingress pod itself"},
		{"http://[::1]:8080/", "is ::1, a loopback address, which is inside the ingress pod"},
		{"http://localhost:8080/", `has the host "localhost", a name of the loopback address`},
		{"http://127.0.0.1:10254/debug/state", "is 127.0.0.1 at port 10254, where the ingress pod itself listens"},
		{"http://127.0.0.1:10246/configuration/backends", "is 127.0.0.1 at port 10246, where the ingress pod itself listens"},
		{"http://0.0.0.0:80/", "is 0.0.0.0 at port 80, where the ingress pod itself listens"},
		{"https://[::1]:443/", "is ::1 at port 443, where the ingress pod itself listens"},
	} {
		for _, key := range []string{"auth-url", "mirror-target"} {
			annotation(key+" "+target.url, key, target.url, "refused", fmt.Sprintf("%q %s", target.url, target.reason))
		}
	}

	// Attack 3 and point 4: characters render refused, in each of the
	// eleven inputs, then the other classes.
	const c1 = "C1 control character U+0085"
	annotation("snippet add_header with a C1 control", "configuration-snippet", "add_header X-A \"a\u0085b\";", "invalid", c1)
	annotation("snippet proxy_set_header with a C1 control", "configuration-snippet", "proxy_set_header X-A \"a\u0085b\";", "invalid", c1)
	annotation("snippet return text with a C1 control", "configuration-snippet", "return 200 \"a\u0085b\";", "invalid", c1)
	annotation("auth-url with a C1 control", "auth-url", "http://auth.default.svc/\u0085", "invalid", c1)
	annotation("auth-signin with a C1 control", "auth-signin", "https://login.example.com/\u0085", "invalid", c1)
	annotation("auth-request-redirect with a C1 control", "auth-request-redirect", "/x\u0085", "invalid", c1)
	annotation("auth-cache-key with a C1 control", "auth-cache-key", "$remote_user\u0085", "invalid", c1)
	list = append(list, hostilePayload{name: "auth-proxy-set-headers value with a C1 control",
		annotations: map[string]string{"auth-url": "http://auth.default.svc/", "auth-proxy-set-headers": "default/auth-headers"},
		extra:       namedConfigMap("auth-headers", map[string]string{"X-A": "a\u0085b"}),
		object:      ingB, key: "nginx.ingress.kubernetes.io/auth-proxy-set-headers", status: "invalid", reason: c1})
	annotation("mirror-target with a C1 control", "mirror-target", "http://mirror.default.svc/\u0085", "invalid", c1)
	list = append(list, hostilePayload{name: "proxy-redirect-to with a C1 control",
		annotations: map[string]string{"proxy-redirect-from": "http://b.internal/", "proxy-redirect-to": "http://b.test/\u0085"},
		object:      ingB, key: "nginx.ingress.kubernetes.io/proxy-redirect-to", status: "invalid", reason: c1})
	annotation("snippet with a line separator", "configuration-snippet", "add_header X-A \"a\u2028b\";", "invalid", "line separator U+2028")
	annotation("mirror-target with a line separator", "mirror-target", "http://mirror.default.svc/\u2028", "invalid", "line separator U+2028")
	annotation("snippet with a bidi override", "configuration-snippet", "add_header X-A \"a\u202eb\";", "invalid", "bidirectional control U+202E")
	// Invalid UTF-8 cannot be YAML: the file is not read, and check names it.
	list = append(list, hostilePayload{name: "snippet with invalid UTF-8",
		raw: []byte(strings.Replace(ingress("b", ingressOpts{class: "restysync", host: "b.test", paths: []path{prefix("/", "web")},
			annotations: map[string]string{"nginx.ingress.kubernetes.io/configuration-snippet": `add_header X-A "a@b";`}}), "@", "\xed\xa0\x80", 1)),
		object: "File {dir}/b.yaml#1", key: "", status: "invalid", reason: "yaml: invalid Unicode character; document left out"})

	// Attack 7 and point 9: values nginx refuses at start.
	annotation("custom-http-errors nginx refuses", "custom-http-errors", "404,499",
		"invalid", `"499" is not a status code from 400 to 599 that nginx's error_page takes`)
	list = append(list, hostilePayload{name: "ConfigMap ssl-ciphers nginx refuses", configMap: map[string]string{"ssl-ciphers": "NOTACIPHER"},
		object: "ConfigMap default/restysync", key: "ssl-ciphers", status: "invalid",
		reason: `names "NOTACIPHER", which is not an OpenSSL cipher or alias`})

	// Point 5: the platform's maxima.
	annotation("client-body-buffer-size over the maximum", "client-body-buffer-size", "999999999m",
		"invalid", `"999999999m": is over the platform's maximum of 1048576 bytes (--max-client-body-buffer-size)`)
	for _, size := range []string{"11m", "0"} {
		list = append(list, hostilePayload{name: "proxy-body-size " + size + " over the maximum",
			annotations: map[string]string{"proxy-body-size": size}, configMap: map[string]string{"max-proxy-body-size": "10m"},
			object: ingB, key: "nginx.ingress.kubernetes.io/proxy-body-size", status: "invalid",
			reason: fmt.Sprintf("%q: is over the platform's maximum of 10485760 bytes (--max-proxy-body-size)", size)})
	}

	// Attack 6 and point 8: the 101st regex path of one host.
	list = append(list, hostilePayload{name: "101 use-regex paths on one host",
		annotations: map[string]string{"use-regex": "true"}, paths: catastrophicPaths(101, "web"),
		object: ingB, key: "nginx.ingress.kubernetes.io/use-regex", status: "invalid",
		reason: `spec.rules[0].http.paths[100].path "/(a+)+(?:$|/x100)": host "b.test" already has 100 regex paths`})

	// Attack 5 and point 7: an FQDN slice naming the pod's loopback and
	// the metadata service; the folder is checked for the cluster.
	for _, address := range []struct{ addr, reason string }{
		{"127.0.0.1", "is 127.0.0.1, a loopback address, which is inside the ingress pod"},
		{"169.254.169.254", "is 169.254.169.254, a link-local address"},
	} {
		list = append(list, hostilePayload{name: "FQDN EndpointSlice naming " + address.addr,
			extra:  service("web", 8080) + "---\n" + fqdnSlice("web", 8080, address.addr),
			object: "EndpointSlice default/web-names", key: fmt.Sprintf("endpoints[0].addresses[0] %q port 8080", address.addr),
			status: "refused", reason: address.reason})
	}
	return list
}

// Issue 25, point 11: `restysync check` refuses every payload the issue
// names, as tenant B writes it beside tenant A's plain Ingress: it exits 1,
// and under the heading of B's Ingress (or the ConfigMap, the slice, the
// file) a line names the key, refused or invalid, and the reason; A's
// Ingress is not blamed.
func TestCheckRefusesHostileTenantPayloads(t *testing.T) {
	for _, p := range hostilePayloads() {
		t.Run(p.name, func(t *testing.T) {
			dir := t.TempDir()
			annotations := map[string]string{}
			for k, v := range p.annotations {
				if !strings.Contains(k, "/") {
					k = "nginx.ingress.kubernetes.io/" + k
				}
				annotations[k] = v
			}
			paths := p.paths
			if paths == nil {
				paths = []path{prefix("/", "web")}
			}
			b := []byte(ingress("b", ingressOpts{class: "restysync", host: "b.test", paths: paths, annotations: annotations}))
			if p.raw != nil {
				b = p.raw
			}
			files := map[string][]byte{
				"a.yaml": []byte(ingress("a", ingressOpts{class: "restysync", host: "a.test", paths: []path{prefix("/", "a")}})),
				"b.yaml": b,
			}
			args := []string{"check", "--source", "file:" + dir}
			if p.configMap != nil {
				files["cm.yaml"] = []byte(configMap(p.configMap))
				args = append(args, "--configmap", cmName)
			}
			if p.extra != "" {
				files["extra.yaml"] = []byte(p.extra)
			}
			for name, content := range files {
				if err := os.WriteFile(filepath.Join(dir, name), content, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			out, err := exec.Command(agentBinary, args...).CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 {
				t.Fatalf("check: %v, want exit code 1\n%s", err, out)
			}
			sections := checkSections(string(out))
			object := strings.ReplaceAll(p.object, "{dir}", dir)
			found := false
			for _, line := range sections[object] {
				found = found || (strings.HasPrefix(line, p.key) &&
					strings.Contains("  "+line, "  "+p.status+"  ") && strings.Contains(line, p.reason))
			}
			if !found {
				t.Errorf("check says:\n%s\nwant under %q a line with %q, %s and %q", out, object, p.key, p.status, p.reason)
			}
			if a := sections["Ingress default/a"]; len(a) != 1 || a[0] != "no annotations of restysync.io/ or nginx.ingress.kubernetes.io/" {
				t.Errorf("check says of tenant A's Ingress %q, want nothing against it", a)
			}
		})
	}
}

// checkSections splits check's text report into its headings ("Ingress
// default/b", "ConfigMap default/restysync", …) and their indented lines,
// without the indent.
func checkSections(out string) map[string][]string {
	sections := map[string][]string{}
	heading := ""
	for line := range strings.SplitSeq(out, "\n") {
		switch {
		case strings.HasPrefix(line, "  "):
			sections[heading] = append(sections[heading], strings.TrimPrefix(line, "  "))
		case line != "":
			heading = line
		}
	}
	return sections
}
