package e2e

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
)

// newStreamStack is newStack with the stream module loaded and extra
// agent flags.
func newStreamStack(t *testing.T, files map[string]string, flags ...string) *stack {
	t.Helper()
	s := &stack{t: t, manifests: t.TempDir()}
	for name, content := range files {
		s.writeFile(name, content)
	}
	args := append([]string{"--source", "file:" + s.manifests}, flags...)
	for _, m := range nginxproc.StreamLoadModules(t) {
		args = append(args, "--load-module", m)
	}
	s.start(args...)
	return s
}

// startTLSBackend serves HTTPS on addr with pair, answering body.
func startTLSBackend(t *testing.T, addr string, port int, pair tlsKeyPair, body string) {
	t.Helper()
	cert, err := tls.X509KeyPair([]byte(pair.cert), []byte(pair.key))
	if err != nil {
		t.Fatal(err)
	}
	l, err := tls.Listen("tcp", net.JoinHostPort(addr, strconv.Itoa(port)), &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, body)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
}

// SSL passthrough (--enable-ssl-passthrough, annotation ssl-passthrough):
// the client sees the backend's own certificate for the passed-through
// host, chosen by SNI; the HTTPS hosts beside it on the same port are
// still terminated by nginx, with the client's address intact; plain HTTP
// for the passed-through host gets the redirect its Ingress asks for; the
// backend's endpoints moving is followed (by a reload: its endpoints are
// in nginx.conf).
func TestSSLPassthrough(t *testing.T) {
	const passIP, movedIP, termIP = "127.0.0.93", "127.0.0.94", "127.0.0.95"
	port := nginxproc.FreePort(t)
	first, moved := newTLSKeyPair(t, 9301, "pass.test"), newTLSKeyPair(t, 9302, "pass.test")
	startTLSBackend(t, passIP, port, first, "backend A")
	startTLSBackend(t, movedIP, port, moved, "backend B")

	// The terminated host's backend answers the client address nginx saw.
	termPort := nginxproc.FreePort(t)
	l, err := net.Listen("tcp", net.JoinHostPort(termIP, strconv.Itoa(termPort)))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "terminated real-ip=%s port=%s", r.Header.Get("X-Real-IP"), r.Header.Get("X-Forwarded-Port"))
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	term := newTLSKeyPair(t, 9303, "term.test")

	passIngress := ingress("pass", ingressOpts{class: "restysync", host: "pass.test", paths: []path{prefix("/", "pass")},
		annotations: map[string]string{
			"nginx.ingress.kubernetes.io/ssl-passthrough":    "true",
			"nginx.ingress.kubernetes.io/force-ssl-redirect": "true",
		}})
	s := newStreamStack(t, map[string]string{
		"classes.yaml":  ingressClasses,
		"pass.yaml":     passIngress,
		"pass-svc.yaml": service("pass", port, ep(passIP)),
		"term-svc.yaml": service("term", termPort, ep(termIP)),
		"term-tls.yaml": tlsSecret("term-tls", term.cert, term.key),
		"term.yaml": ingress("term", ingressOpts{class: "restysync", host: "term.test", paths: []path{prefix("/", "term")},
			tls: []ingressTLS{{hosts: []string{"term.test"}, secret: "term-tls"}}}),
	}, "--enable-ssl-passthrough")
	httpsPort := stackHTTPSPort(t, s)
	c := httpsClient(httpsPort)

	s.eventually("pass.test answers with the backend's own certificate", func() error {
		serial, body, err := httpsGet(c, "pass.test")
		if err != nil {
			return err
		}
		if serial != "9301" || body != "backend A" {
			return fmt.Errorf("certificate %s, body %q; want the backend's 9301 and \"backend A\"", serial, body)
		}
		return nil
	})
	serial, body, err := httpsGet(c, "term.test")
	if err != nil {
		t.Fatalf("term.test beside the passthrough host: %v", err)
	}
	want := "terminated real-ip=127.0.0.1 port=" + strconv.Itoa(httpsPort)
	if serial != "9303" || body != want {
		t.Errorf("term.test: certificate %s, body %q; want nginx's 9303 and %q", serial, body, want)
	}
	if got, err := servedCertificate(httpsPort, "unknown.test"); err != nil || got != "default" {
		t.Errorf("a name nobody passes through: certificate %q, %v; want nginx's default", got, err)
	}
	status, _, err := s.get("pass.test", "/app")
	if err != nil || status != http.StatusPermanentRedirect {
		t.Errorf("plain HTTP to pass.test: %d, %v; want 308 (force-ssl-redirect)", status, err)
	}

	s.writeFile("pass-svc.yaml", service("pass", port, ep(movedIP)))
	s.eventually("pass.test follows its endpoints", func() error {
		serial, body, err := httpsGet(c, "pass.test")
		if err != nil {
			return err
		}
		if serial != "9302" || body != "backend B" {
			return fmt.Errorf("certificate %s, body %q; want 9302 and \"backend B\"", serial, body)
		}
		return nil
	})

	// Passthrough off for the Ingress: nginx terminates pass.test again.
	s.writeFile("pass.yaml", strings.Replace(passIngress, `ssl-passthrough: "true"`, `ssl-passthrough: "false"`, 1))
	s.eventually("pass.test terminated by nginx", func() error {
		got, err := servedCertificate(httpsPort, "pass.test")
		if err != nil {
			return err
		}
		if got != "default" {
			return fmt.Errorf("certificate %s, want nginx's default", got)
		}
		return nil
	})
}

// streamServer answers each line of a TCP connection, or each UDP
// datagram, with "name:" and what it got.
func startTCPEcho(t *testing.T, addr string, port int, name string) {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(addr, strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				conn.SetDeadline(time.Now().Add(10 * time.Second))
				r := bufio.NewReader(conn)
				for range 10 {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					fmt.Fprintf(conn, "%s:%s", name, line)
				}
			}()
		}
	}()
}

func startUDPEcho(t *testing.T, addr string, port int, name string) {
	t.Helper()
	pc, err := net.ListenPacket("udp", net.JoinHostPort(addr, strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			pc.WriteTo([]byte(name+":"+string(buf[:n])), from)
		}
	}()
}

// udpService is a Service with UDP port 53 named "dns" and one
// EndpointSlice whose port "dns" is port.
func udpService(name string, port int, addr string) string {
	return serviceWith(name, serviceOpts{protocol: "UDP", portName: "dns", port: 53, slicePort: port, endpoints: []endpoint{ep(addr)}})
}

func namedConfigMap(name string, data map[string]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: default\ndata:\n", name)
	for k, v := range data {
		fmt.Fprintf(&b, "  %q: %q\n", k, v)
	}
	return b.String()
}

// tcpExchange sends line over a new TCP connection to 127.0.0.1:port and
// returns the answer's first line.
func tcpExchange(port int, line string) (string, error) {
	conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), 2*time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.WriteString(conn, line+"\n"); err != nil {
		return "", err
	}
	answer, err := bufio.NewReader(conn).ReadString('\n')
	return strings.TrimSpace(answer), err
}

func udpExchange(port int, msg string) (string, error) {
	conn, err := net.Dial("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := io.WriteString(conn, msg); err != nil {
		return "", err
	}
	buf := make([]byte, 2048)
	n, err := conn.Read(buf)
	return string(buf[:n]), err
}

// TCP and UDP services (--tcp-services-configmap, --udp-services-configmap,
// ingress-nginx's format): a TCP echo and a UDP echo behind nginx, a PROXY
// protocol header sent to the backend where the value asks for it, each
// endpoint change followed, a bad entry refused with the rest served, and
// a service removed from the ConfigMap closed.
func TestTCPUDPServices(t *testing.T) {
	const ipA, ipB = "127.0.0.96", "127.0.0.97"
	backendPort := nginxproc.FreePort(t)
	for _, b := range []struct{ ip, name string }{{ipA, "A"}, {ipB, "B"}} {
		startTCPEcho(t, b.ip, backendPort, b.name)
		startUDPEcho(t, b.ip, backendPort, b.name)
	}
	tcpPort, proxyPort, udpPort := nginxproc.FreePort(t), nginxproc.FreePort(t), nginxproc.FreePort(t)
	tcp := func(extra map[string]string) string {
		data := map[string]string{
			strconv.Itoa(tcpPort):   "default/echo:80",
			strconv.Itoa(proxyPort): "default/echo:http::PROXY",
		}
		for k, v := range extra {
			data[k] = v
		}
		return namedConfigMap("tcp-services", data)
	}
	s := newStreamStack(t, map[string]string{
		"classes.yaml": ingressClasses,
		"echo.yaml":    service("echo", backendPort, ep(ipA)),
		"dns.yaml":     udpService("dns", backendPort, ipA),
		"tcp-svc.yaml": tcp(map[string]string{"70000": "default/echo:80", "9": "default/echo;rm:80"}),
		"udp-svc.yaml": namedConfigMap("udp-services", map[string]string{strconv.Itoa(udpPort): "default/dns:53"}),
	}, "--tcp-services-configmap", "default/tcp-services", "--udp-services-configmap", "default/udp-services")

	expectTCP := func(port int, want string) func() error {
		return func() error {
			got, err := tcpExchange(port, "hello")
			if err != nil {
				return err
			}
			if !strings.HasPrefix(got, want) {
				return fmt.Errorf("TCP %d answered %q, want %q…", port, got, want)
			}
			return nil
		}
	}
	expectUDP := func(want string) func() error {
		return func() error {
			got, err := udpExchange(udpPort, "ping")
			if err != nil {
				return err
			}
			if got != want {
				return fmt.Errorf("UDP answered %q, want %q", got, want)
			}
			return nil
		}
	}
	s.eventually("the TCP service answers", expectTCP(tcpPort, "A:hello"))
	s.eventually("the TCP service with PROXY answers", expectTCP(proxyPort, "A:PROXY TCP4 127.0.0.1 127.0.0.1 "))
	s.eventually("the UDP service answers", expectUDP("A:ping"))
	for _, want := range []string{`TCP service "70000": the key must be a port number`, `TCP service "9": value "default/echo;rm:80"`} {
		logged := strings.Trim(strconv.Quote(want), `"`) // as the text log quotes it
		if !strings.Contains(s.agent.log.String(), logged) {
			t.Errorf("agent log lacks the problem %q", want)
		}
	}

	s.writeFile("echo.yaml", service("echo", backendPort, ep(ipB)))
	s.writeFile("dns.yaml", udpService("dns", backendPort, ipB))
	s.eventually("the TCP service follows its endpoints", expectTCP(tcpPort, "B:hello"))
	s.eventually("the UDP service follows its endpoints", expectUDP("B:ping"))

	s.writeFile("tcp-svc.yaml", namedConfigMap("tcp-services", map[string]string{strconv.Itoa(proxyPort): "default/echo:http::PROXY"}))
	s.eventually("the removed TCP service is closed", func() error {
		if _, err := tcpExchange(tcpPort, "hello"); err == nil {
			return fmt.Errorf("port %d still answers", tcpPort)
		}
		return nil
	})
	if err := expectTCP(proxyPort, "B:PROXY TCP4 ")(); err != nil {
		t.Errorf("the other TCP service: %v", err)
	}
}
