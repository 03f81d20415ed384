package configmap

import (
	"slices"

	"github.com/restysync/restysync/agent/internal/model"
)

// notSupportedYet are the keys of ingress-nginx's ConfigMap that restysync
// does not read (yet), sorted: its users' ConfigMaps hold them, and
// restysync check must tell such a key, which changes what nginx does
// under ingress-nginx, from a typo or a key nobody reads, which changes
// nothing. Written from ingress-nginx's docs/user-guide/nginx-configuration/
// configmap.md (its table and sections, the OpenTelemetry keys of v1.10 on,
// strict-validate-path-type and annotations-risk-level); a key restysync
// comes to read leaves this list (ingressnginx_test.go holds the two apart).
var notSupportedYet = func() []string {
	keys := []string{
		"access-log-params", "add-headers", "allow-backend-server-header",
		"annotation-value-word-blocklist", "annotations-risk-level", "bind-address", "block-cidrs",
		"block-referers", "block-user-agents", "brotli-level", "brotli-min-length", "brotli-types",
		"client-body-timeout", "client-header-buffer-size", "client-header-timeout",
		"datadog-collector-host", "datadog-collector-port", "datadog-environment",
		"datadog-operation-name-override", "datadog-priority-sampling", "datadog-sample-rate",
		"datadog-service-name", "debug-connections", "default-type", "disable-ipv6", "disable-ipv6-dns",
		"enable-access-log-for-default-backend", "enable-brotli", "enable-dynamic-tls-records",
		"enable-geoip2", "enable-multi-accept", "enable-ocsp", "enable-opentelemetry",
		"enable-opentracing", "enable-real-ip", "enable-syslog", "enable-underscores-in-headers",
		"error-log-path", "generate-request-id",
		"global-rate-limit-memcached-connect-timeout", "global-rate-limit-memcached-host",
		"global-rate-limit-memcached-max-idle-timeout", "global-rate-limit-memcached-pool-size",
		"global-rate-limit-memcached-port", "global-rate-limit-status-code", "hide-headers",
		"http-access-log-path", "http-redirect-code", "http2-max-concurrent-streams",
		"http2-max-field-size", "http2-max-header-size", "http2-max-requests", "ignore-invalid-headers",
		"jaeger-baggage-header", "jaeger-collector-host", "jaeger-collector-port", "jaeger-debug-header",
		"jaeger-endpoint", "jaeger-propagation-format", "jaeger-sampler-host", "jaeger-sampler-param",
		"jaeger-sampler-port", "jaeger-sampler-type", "jaeger-service-name",
		"jaeger-trace-baggage-header-prefix", "jaeger-trace-context-header-name",
		"jaeger-tracer-baggage-header-prefix", "large-client-header-buffers", "limit-conn-status-code",
		"limit-conn-zone-variable", "limit-req-status-code", "log-format-stream", "lua-shared-dicts", "map-hash-bucket-size",
		"max-worker-open-files", "nginx-status-ipv4-whitelist", "nginx-status-ipv6-whitelist",
		"no-auth-locations", "no-tls-redirect-locations", "opentelemetry-config",
		"opentelemetry-operation-name", "opentelemetry-trust-incoming-span",
		"opentracing-location-operation-name", "opentracing-operation-name",
		"otel-max-export-batch-size", "otel-max-queuesize", "otel-sampler", "otel-sampler-parent-based",
		"otel-sampler-ratio", "otel-schedule-delay-millis", "otel-service-name", "otlp-collector-host",
		"otlp-collector-port", "plugins", "proxy-add-original-uri-header",
		"proxy-headers-hash-bucket-size", "proxy-headers-hash-max-size", "proxy-protocol-header-timeout",
		"proxy-set-headers", "proxy-ssl-location-only", "proxy-stream-next-upstream",
		"proxy-stream-next-upstream-timeout", "proxy-stream-next-upstream-tries",
		"proxy-stream-responses", "proxy-stream-timeout", "retry-non-idempotent", "reuse-port",
		"server-name-hash-bucket-size", "server-name-hash-max-size",
		"ssl-buffer-size", "ssl-dh-param", "ssl-early-data", "ssl-ecdh-curve", "ssl-reject-handshake",
		"ssl-session-cache", "ssl-session-cache-size", "ssl-session-ticket-key", "ssl-session-tickets",
		"ssl-session-timeout", "stream-access-log-path", "strict-validate-path-type", "syslog-host",
		"syslog-port", "upstream-keepalive-requests", "upstream-keepalive-time", "use-geoip",
		"use-geoip2", "use-http2", "use-proxy-protocol", "variables-hash-bucket-size",
		"variables-hash-max-size", "worker-cpu-affinity", "worker-shutdown-timeout",
		"zipkin-collector-host", "zipkin-collector-port", "zipkin-sample-rate", "zipkin-service-name",
		// Keys of the names of annotations restysync reads (as annotations).
		model.KeySSLRedirect, model.KeyForceSSLRedirect, model.KeyWhitelistSourceRange,
		model.KeyProxyRequestBuffering, model.KeyProxyNextUpstream, model.KeyProxyNextUpstreamTimeout,
		model.KeyProxyNextUpstreamTries,
	}
	slices.Sort(keys)
	return keys
}()

// Reasons of the keys Apply does not read.
const (
	reasonNotSupportedYet = "an ingress-nginx key restysync does not support yet; it is ignored"
	reasonNotIngressNginx = "not an ingress-nginx key (ingress-nginx ignores it too); it is ignored"
)

// knownKeys are the keys Apply reads (supported or refused) and those of
// notSupportedYet: the names a typo is measured against.
func knownKeys() []string {
	known := append(append(SupportedKeys(), GlobalAuthKeys...), snippetKeys...)
	known = append(known, allowSnippetAnnotations)
	for key := range refusedKeys {
		known = append(known, key)
	}
	return append(known, notSupportedYet...)
}

// unreadKey is the Key of a key Apply does not read: an ingress-nginx key
// restysync does not support yet (StatusUnknown), a typo of a known key
// (StatusTypo, with the key meant), or a key ingress-nginx does not read
// either (StatusIgnoredByIngressNginx).
func unreadKey(key string) Key {
	if _, found := slices.BinarySearch(notSupportedYet, key); found {
		return Key{Key: key, Status: StatusUnknown, Reason: reasonNotSupportedYet}
	}
	if near := model.TypoOf(key, knownKeys()); near != "" {
		return Key{Key: key, Status: StatusTypo, Reason: "not an ingress-nginx key; a typo of " + near + "?; it is ignored",
			Suggestion: near}
	}
	return Key{Key: key, Status: StatusIgnoredByIngressNginx, Reason: reasonNotIngressNginx}
}
