package main

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/restysync/restysync/agent/internal/events"
	"github.com/restysync/restysync/agent/internal/kubeclient"
	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/source/kube"
	"github.com/restysync/restysync/agent/internal/status"
	"github.com/restysync/restysync/agent/internal/syncer"
)

// serviceAccountNamespace is where a pod finds its own namespace.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

func kubeFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "kubeconfig", EnvVars: env("KUBECONFIG"),
			Usage: "kubeconfig `FILE` to use outside a cluster (default: $KUBECONFIG, else ~/.kube/config, else the in-cluster config)"},
		&cli.StringFlag{Name: "context", EnvVars: env("CONTEXT"), Usage: "kubeconfig context to use (default: its current context)"},
		&cli.StringFlag{Name: "namespace", EnvVars: env("NAMESPACE"),
			Usage: "watch Ingresses, Services, EndpointSlices, Secrets, Gateways, HTTPRoutes and ReferenceGrants in this namespace only (default: all)"},
		&cli.Float64Flag{Name: "kube-api-qps", Value: 50, EnvVars: env("KUBE_API_QPS"), Usage: "steady requests per second to the API server"},
		&cli.IntFlag{Name: "kube-api-burst", Value: 100, EnvVars: env("KUBE_API_BURST"), Usage: "request burst to the API server"},
		&cli.StringFlag{Name: "configmap", EnvVars: env("CONFIGMAP"),
			Usage: "global settings from this ConfigMap, `NAMESPACE/NAME`, with ingress-nginx's key names (any source; its keys override the flags; default: none)"},
		&cli.StringFlag{Name: "tcp-services-configmap", EnvVars: env("TCP_SERVICES_CONFIGMAP"),
			Usage: "TCP services from this ConfigMap, `NAMESPACE/NAME`, as ingress-nginx's: each key a port, each value namespace/service:port[:PROXY][:PROXY] (any source; default: none)"},
		&cli.StringFlag{Name: "udp-services-configmap", EnvVars: env("UDP_SERVICES_CONFIGMAP"),
			Usage: "UDP services from this ConfigMap, `NAMESPACE/NAME`: each key a port, each value namespace/service:port (any source; default: none)"},
		&cli.StringFlag{Name: "publish-service", EnvVars: env("PUBLISH_SERVICE"),
			Usage: "write the addresses of this Service (`NAMESPACE/NAME`) into the status of served Ingresses"},
		&cli.StringSliceFlag{Name: "publish-address", EnvVars: env("PUBLISH_ADDRESS"),
			Usage: "write these IPs or host names into the status of served Ingresses (repeatable; instead of --publish-service)"},
		&cli.StringFlag{Name: "election-namespace", EnvVars: env("ELECTION_NAMESPACE", "POD_NAMESPACE"),
			Usage: "namespace of the leader-election Lease (default: the pod's namespace)"},
		&cli.StringFlag{Name: "election-id", Value: status.DefaultLeaseName, EnvVars: env("ELECTION_ID"),
			Usage: "name of the leader-election Lease; replicas that share it elect one status writer"},
		&cli.StringFlag{Name: "pod-name", EnvVars: env("POD_NAME", "POD_NAME"),
			Usage: "this replica's identity in the Lease (default: the host name, which is the pod name in a pod)"},
	}
}

// kubeConfig is the validated form of the kube flags.
type kubeConfig struct {
	kubeconfig, context  string
	namespace, configMap string
	// tcpServices and udpServices are ingress-nginx's ConfigMaps of TCP
	// and UDP services, "" for none.
	tcpServices, udpServices string
	// ingressClass and watchWithoutClass say which Ingresses are served,
	// gatewayController which Gateways: the kube source reads only the
	// Secrets those name.
	ingressClass      string
	watchWithoutClass bool
	gatewayController string
	// gatewayServices has the leader keep the Gateway Services
	// (--gateway-services).
	gatewayServices     bool
	qps                 float32
	burst               int
	publishService      string
	publishAddresses    []string
	electionNamespace   string
	electionID, podName string
}

func parseKubeConfig(c *cli.Context) (kubeConfig, error) {
	kc := kubeConfig{
		kubeconfig:        c.String("kubeconfig"),
		context:           c.String("context"),
		namespace:         c.String("namespace"),
		configMap:         c.String("configmap"),
		tcpServices:       c.String("tcp-services-configmap"),
		udpServices:       c.String("udp-services-configmap"),
		ingressClass:      c.String("ingress-class"),
		watchWithoutClass: c.Bool("watch-ingress-without-class"),
		gatewayController: c.String("gateway-controller-name"),
		gatewayServices:   c.Bool("gateway-services"),
		qps:               float32(c.Float64("kube-api-qps")),
		burst:             c.Int("kube-api-burst"),
		publishService:    c.String("publish-service"),
		publishAddresses:  c.StringSlice("publish-address"),
		electionID:        c.String("election-id"),
		podName:           c.String("pod-name"),
	}
	if kc.qps <= 0 {
		return kc, fmt.Errorf("--kube-api-qps %v: must be positive", c.Float64("kube-api-qps"))
	}
	if kc.burst < 1 {
		return kc, fmt.Errorf("--kube-api-burst %d: must be at least 1", kc.burst)
	}
	if kc.configMap != "" && !validNamespacedName(kc.configMap) {
		return kc, fmt.Errorf("--configmap %q: want NAMESPACE/NAME", kc.configMap)
	}
	for flag, value := range map[string]string{"tcp-services-configmap": kc.tcpServices, "udp-services-configmap": kc.udpServices} {
		if value != "" && !validNamespacedName(value) {
			return kc, fmt.Errorf("--%s %q: want NAMESPACE/NAME", flag, value)
		}
	}
	if kc.publishService != "" && !validNamespacedName(kc.publishService) {
		return kc, fmt.Errorf("--publish-service %q: want NAMESPACE/NAME", kc.publishService)
	}
	if kc.publishService != "" && len(kc.publishAddresses) > 0 {
		return kc, fmt.Errorf("--publish-service and --publish-address: give one, not both")
	}
	if kc.electionID == "" {
		return kc, fmt.Errorf("--election-id: must not be empty")
	}
	kc.electionNamespace = c.String("election-namespace")
	if kc.electionNamespace == "" {
		if data, err := os.ReadFile(serviceAccountNamespace); err == nil {
			kc.electionNamespace = strings.TrimSpace(string(data))
		}
	}
	if kc.publishing() && kc.electionNamespace == "" {
		return kc, fmt.Errorf("--election-namespace: needed to write Ingress status outside a pod")
	}
	return kc, nil
}

func (kc kubeConfig) publishing() bool {
	return kc.publishService != "" || len(kc.publishAddresses) > 0
}

func validNamespacedName(s string) bool {
	ns, name, ok := strings.Cut(s, "/")
	return ok && ns != "" && name != "" && !strings.Contains(name, "/")
}

// kubeClient builds a client with kubeRESTConfig.
func kubeClient(kc kubeConfig) (kubeclient.Interface, error) {
	cfg, err := kubeRESTConfig(kc)
	if err != nil {
		return nil, err
	}
	return kubeclient.New(cfg)
}

// kubeRESTConfig builds a client config with client-go's loading rules:
// --kubeconfig (and --context) when given, else $KUBECONFIG, else
// ~/.kube/config, else the in-cluster config (a pod has no kubeconfig
// file).
func kubeRESTConfig(kc kubeConfig) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kc.kubeconfig
	if kc.kubeconfig != "" {
		if _, err := os.Stat(kc.kubeconfig); err != nil {
			return nil, fmt.Errorf("--kubeconfig: %w", err)
		}
	}
	overrides := &clientcmd.ConfigOverrides{CurrentContext: kc.context}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
	if clientcmd.IsEmptyConfig(err) {
		return nil, noClusterConfig(kc)
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes client config: %w", err)
	}
	cfg.QPS, cfg.Burst = kc.qps, kc.burst
	cfg.UserAgent = "restysync/" + version
	return cfg, nil
}

// noClusterConfig replaces client-go's "no configuration has been provided,
// try setting KUBERNETES_MASTER environment variable" (a variable nothing
// reads any more): it says where the kube source looked, in client-go's
// order, and what to set.
func noClusterConfig(kc kubeConfig) error {
	var looked []string
	switch env := os.Getenv(clientcmd.RecommendedConfigPathEnvVar); {
	case kc.kubeconfig != "": // client-go reads it alone; kubeClient reports one that is missing
		looked = append(looked, "--kubeconfig "+kc.kubeconfig+" (no cluster in it)")
	case env != "":
		looked = append(looked, "--kubeconfig (not set)", "$KUBECONFIG="+env+" (no such file, or no cluster in it)")
	default:
		looked = append(looked, "--kubeconfig (not set)", "$KUBECONFIG (not set)",
			clientcmd.RecommendedHomeFile+" (no such file, or no cluster in it)")
	}
	if os.Getenv("KUBERNETES_SERVICE_HOST") == "" || os.Getenv("KUBERNETES_SERVICE_PORT") == "" {
		looked = append(looked, "the in-cluster config ($KUBERNETES_SERVICE_HOST and _PORT not set: not in a pod)")
	} else {
		looked = append(looked, "the in-cluster config (no ServiceAccount token in "+filepath.Dir(serviceAccountNamespace)+")")
	}
	return fmt.Errorf("--source kube: no cluster to connect to; looked at %s. Set --kubeconfig FILE (or $KUBECONFIG) to a kubeconfig, "+
		"run in a pod with a ServiceAccount, or read a folder of manifests with --source file:DIR", strings.Join(looked, ", "))
}

// kubeParts are what the kube source adds to the sync loop.
type kubeParts struct {
	source *kube.Source
	// onSync writes Ingress status (when publishing) and Events.
	onSync func(syncer.Report)
	// stopped is closed when the status writer has stopped and released its
	// Lease, so a replica can take over at once (closed at once without one).
	stopped <-chan struct{}
	// leader says whether this replica holds the Lease (nil: no status writer).
	leader func() bool
}

// startKube starts the kube parts; their goroutines run until ctx is done.
func startKube(ctx context.Context, kc kubeConfig, logger *slog.Logger) (kubeParts, error) {
	client, err := kubeClient(kc)
	if err != nil {
		return kubeParts{}, err
	}
	src := kube.New(client, kube.Options{Namespace: kc.namespace, ConfigMap: kc.configMap,
		TCPServices: kc.tcpServices, UDPServices: kc.udpServices,
		IngressClass: kc.ingressClass, WatchWithoutClass: kc.watchWithoutClass, GatewayController: kc.gatewayController,
		Logger: logger.With("component", "kube")})

	recorder := events.New(client, events.Options{Logger: logger.With("component", "events"), GatewayAPI: true})
	if err := recorder.Start(ctx); err != nil {
		return kubeParts{}, err
	}
	lookup := func(namespace, name string) runtime.Object {
		if ing := src.Ingress(namespace, name); ing != nil {
			return ing
		}
		return nil // not a typed nil inside the interface
	}
	lookupClass := func(name string) runtime.Object {
		if class := src.IngressClass(name); class != nil {
			return class
		}
		return nil
	}

	// The Gateway API status needs only the Lease; the Ingress status
	// needs the addresses to publish as well.
	var writer *status.Writer
	stopped := make(chan struct{})
	if kc.publishing() || kc.electionNamespace != "" {
		var pub *status.Publisher
		if kc.publishing() {
			pub, err = status.NewPublisher(client, kc.publishService, kc.publishAddresses)
			if err != nil {
				return kubeParts{}, err
			}
		} else {
			logger.Info("Ingress status is not written: neither --publish-service nor --publish-address is set")
		}
		writer, err = status.NewWriter(client, pub, status.Options{
			Namespace: kc.electionNamespace,
			LeaseName: kc.electionID,
			Identity:  kc.podName,
			Lookup:    src.Ingress,
			Logger:    logger.With("component", "status"),
			// The source's Gateway API caches: a pass that changes
			// nothing sends no request.
			GatewayAPI: &status.GatewayAPIOptions{
				ControllerName: cmp.Or(kc.gatewayController, model.GatewayControllerName),
				Lookup:         src,
				Services:       gatewayServiceLookup(kc, src),
			},
		})
		if err != nil {
			return kubeParts{}, err
		}
		go func() {
			defer close(stopped)
			if err := writer.Run(ctx); err != nil {
				logger.Error("status writer stopped", "error", err)
			}
		}()
	} else {
		close(stopped)
		logger.Info("Ingress and Gateway API status are not written: no --election-namespace for the Lease outside a pod, and neither --publish-service nor --publish-address is set")
	}

	// servedHash is the config whose Ingresses were last reported served.
	// A fast-path sync on that config serves the same Ingresses, so the
	// per-Ingress work below is skipped on the many syncs that only move
	// endpoints (it is O(Ingresses)).
	servedHash := ""
	// A fast-path sync keeps the model's Gateway API status, and the
	// applied one unless it is the first applied since: it is fed to the
	// writer only then, so an endpoint change costs no O(routes) work.
	gatewayFed, gatewayFedApplied := false, false
	onSync := func(r syncer.Report) {
		if writer != nil && (r.Path != "fast" || !gatewayFed || r.Applied != gatewayFedApplied) {
			writer.UpdateGatewayAPI(r.Model.GatewayAPI, r.GatewayAPIApplied)
			gatewayFed, gatewayFedApplied = true, r.Applied
		}
		recorder.GatewayAPIProblems(r.Problems)
		recorder.Problems(r.Problems, lookup)
		recorder.ConfigMapProblems(r.Problems, src.ConfigMap())
		recorder.IngressClassProblems(r.Problems, lookupClass)
		if r.Path == "full" {
			recorder.Forget(lookup)
		}
		if !r.Applied {
			servedHash = ""
			return
		}
		if r.Path == "fast" && r.ConfigHash == servedHash {
			return
		}
		servedHash = r.ConfigHash
		ids := r.Model.ServedIngresses()
		served := make([]types.NamespacedName, 0, len(ids))
		for _, id := range ids {
			ns, name, _ := strings.Cut(id, "/")
			served = append(served, types.NamespacedName{Namespace: ns, Name: name})
			recorder.Served(src.Ingress(ns, name))
		}
		if writer != nil {
			writer.Update(served)
		}
	}
	parts := kubeParts{source: src, onSync: onSync, stopped: stopped}
	if writer != nil {
		parts.leader = writer.IsLeader
	}
	return parts, nil
}

// gatewayServiceLookup is the writer's lookup of the Gateway Services:
// the source's caches, or nil when --gateway-services is off (none kept).
func gatewayServiceLookup(kc kubeConfig, src *kube.Source) status.GatewayServiceLookup {
	if !kc.gatewayServices {
		return nil
	}
	return src
}
