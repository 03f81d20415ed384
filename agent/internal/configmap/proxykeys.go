package configmap

import (
	"fmt"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/render"
)

// The keys of the proxy annotations of the same names (model/proxykeys.go),
// for every location of the servers that serve Ingresses: the response
// buffers, client_body_buffer_size, the Set-Cookie and Location rewrites
// and limit_rate. They take the annotations' values.

func sizeKey(field func(*render.HTTP) *string, zero bool) keyFunc {
	return func(a *applier, v string) string {
		size, reason := model.ParseNginxSize(v, zero)
		if reason == "" {
			*field(a.h) = size
		}
		return reason
	}
}

func buffersNumberKey(a *applier, v string) string {
	n, reason := model.ParseBuffersNumber(v)
	if reason == "" {
		a.h.ProxyBuffersNumber = n
	}
	return reason
}

func cookieKey(field func(*render.HTTP) *string, path bool) keyFunc {
	return func(a *applier, v string) string {
		rewrite, reason := model.ParseCookieRewrite(v, path)
		if reason == "" {
			*field(a.h) = rewrite
		}
		return reason
	}
}

// redirectKey reads proxy-redirect-from (from) or proxy-redirect-to;
// checkProxyKeys pairs them as the annotations are paired.
func redirectKey(from bool) keyFunc {
	return func(a *applier, v string) string {
		switch {
		case from && v == "off":
			a.h.ProxyRedirectFrom = v
			return ""
		case from && v == "default", !from && v == "off":
			return ""
		}
		canonical, reason := model.ParseProxyRedirect(v, from)
		if reason != "" {
			return reason
		}
		if from {
			a.h.ProxyRedirectFrom = canonical
		} else {
			a.h.ProxyRedirectTo = canonical
		}
		return ""
	}
}

func rateKey(field func(*render.HTTP) *string) keyFunc {
	return func(a *applier, v string) string {
		r, reason := model.ParseRate(v)
		if reason == "" {
			*field(a.h) = r
		}
		return reason
	}
}

// checkProxyKeys checks what the keys above set together: buffers nginx
// would refuse are a Problem, and the number, busy size and largest
// temporary file keep their defaults; a proxy-redirect-from without a
// proxy-redirect-to rewrites nothing, as in ingress-nginx.
func checkProxyKeys(h *render.HTTP, data map[string]string, status map[string]Key, problem func(key, reason string)) {
	p := model.ProxySettings{BufferSize: h.ProxyBufferSize, BuffersNumber: h.ProxyBuffersNumber,
		BusyBuffersSize: h.ProxyBusyBuffersSize, MaxTempFileSize: h.ProxyMaxTempFileSize}
	if bufs, ok := p.Buffers(); ok {
		if reason := bufs.Check(); reason != "" {
			reason = fmt.Sprintf("with %d buffers of %s, a busy size of %s and temporary files up to %s, %s; "+
				"proxy-buffers-number, proxy-busy-buffers-size and proxy-max-temp-file-size keep their defaults",
				bufs.Number, bufs.Size, bufs.Busy, bufs.MaxTemp, reason)
			marked := false
			for _, key := range []string{model.KeyProxyBuffersNumber, model.KeyProxyBusyBuffersSize, model.KeyProxyMaxTempFileSize, model.KeyProxyBufferSize} {
				if k, ok := status[key]; ok && k.Status == StatusSupported && (!marked || key != model.KeyProxyBufferSize) {
					status[key] = Key{Key: key, Status: StatusInvalid, Reason: fmt.Sprintf("%q: %s", clip(data[key]), reason)}
					problem(key, status[key].Reason)
					marked = true
				}
			}
			h.ProxyBuffersNumber, h.ProxyBusyBuffersSize, h.ProxyMaxTempFileSize = 0, "", ""
		}
	}
	if h.ProxyRedirectFrom == "off" {
		h.ProxyRedirectTo = ""
	} else if h.ProxyRedirectFrom == "" || h.ProxyRedirectTo == "" {
		h.ProxyRedirectFrom, h.ProxyRedirectTo = "", ""
	}
}
