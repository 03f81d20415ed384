package metrics

import (
	"compress/gzip"
	"errors"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/restysync/restysync/agent/internal/luaapi"
)

// The text exposition of a scrape, written here rather than by promhttp
// for the per-backend Lua series: at 50,000 backends they are 150,000
// series, and made into dto series for promhttp's encoder they were most
// of a scrape's garbage (30 MB, and 7 MB more for expfmt's escaped copy
// of each family). The rest (the registry's families, Lua's single ones)
// is still encoded by expfmt, and every scrape this file does not take
// on, by promhttp: plainTextScrape only takes those whose answer it can
// give exactly as promhttp would (TestServeTextAsPromhttp).

// registerHandlerErrors registers promhttp_metric_handler_errors_total as
// promhttp.HandlerFor does, or returns the one registered.
func registerHandlerErrors(reg *prometheus.Registry) *prometheus.CounterVec {
	errs := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "promhttp_metric_handler_errors_total",
		Help: "Total number of internal errors encountered by the promhttp metric handler.",
	}, []string{"cause"})
	errs.WithLabelValues("gathering")
	errs.WithLabelValues("encoding")
	if err := reg.Register(errs); err != nil {
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			panic(err)
		}
		return are.ExistingCollector.(*prometheus.CounterVec)
	}
	return errs
}

// plainTextScrape says whether r asks for the text format (format), without
// promhttp's name[] filter, and whether gzip is the encoding promhttp
// would choose. ok is false for any other request, or an Accept-Encoding
// other than a list of bare tokens (no q values, no "*" or "identity"),
// whose negotiation is then left to promhttp. Prometheus sends
// "Accept-Encoding: gzip" and asks for text unless told to ask for
// protobuf (README: "Metrics").
func plainTextScrape(r *http.Request) (format expfmt.Format, gz, ok bool) {
	format = expfmt.NegotiateAccept(r.Header, expfmt.DefaultAcceptedFormats()...)
	if format.FormatType() != expfmt.TypeTextPlain {
		return format, false, false
	}
	if r.URL != nil && r.URL.RawQuery != "" && r.URL.Query().Has("name[]") {
		return format, false, false
	}
	for _, value := range r.Header.Values("Accept-Encoding") {
		for token := range strings.SplitSeq(value, ",") {
			token = strings.Trim(token, " \t")
			if token == "" || token == "*" || token == "identity" || strings.Trim(token, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
				return format, false, false
			}
			gz = gz || token == "gzip"
		}
	}
	return format, gz, true
}

// gzipWriters are reused across scrapes, as promhttp reuses its own: a
// gzip.Writer holds some 800 KB of compressor state. They compress at
// BestSpeed, not promhttp's default level: at 50,000 backends that is
// 45 ms of CPU a scrape instead of 158, for a body of 669 KB, not 608.
var gzipWriters = sync.Pool{New: func() any {
	w, err := gzip.NewWriterLevel(nil, gzip.BestSpeed)
	if err != nil {
		panic(err) // a valid level
	}
	return w
}}

// serveText writes g in the text format, as promhttp.HandlerFor with
// ContinueOnError would: the same headers, the same bytes, the same
// errors counted. Any error gathering is counted; a family that fails to
// encode is counted and the next one written.
func (m *Metrics) serveText(w http.ResponseWriter, g gathered, gz bool, format expfmt.Format, handlerErrors *prometheus.CounterVec) {
	if g.err != nil {
		handlerErrors.WithLabelValues("gathering").Inc()
	}
	w.Header().Add("Vary", "Accept")
	w.Header().Add("Vary", "Accept-Encoding")
	w.Header().Set("Content-Type", string(format))
	var out io.Writer = w
	if gz {
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzipWriters.Get().(*gzip.Writer)
		zw.Reset(w)
		defer func() {
			zw.Close()
			gzipWriters.Put(zw)
		}()
		out = zw
	}
	enc := expfmt.NewEncoder(out, format)
	failed := func(err error) {
		if err != nil {
			handlerErrors.WithLabelValues("encoding").Inc()
		}
	}
	families := g.families
	var backends []luaapi.BackendMetrics
	if g.lua != nil {
		families = append(g.lua.singleFamilies(), families...)
		slices.SortFunc(families, byFamilyName)
		backends = g.lua.backends
	}
	text := textWriter{out: out}
	next := 0 // the next of perBackend to write, in its place by name
	for _, f := range families {
		for ; len(backends) > 0 && next < len(perBackend) && perBackend[next].name < f.GetName(); next++ {
			failed(text.backendFamily(next, backends))
		}
		failed(enc.Encode(f))
	}
	for ; len(backends) > 0 && next < len(perBackend); next++ {
		failed(text.backendFamily(next, backends))
	}
}

// textWriter writes the per-backend families in the text format, in
// chunks of textChunk bytes.
type textWriter struct {
	out io.Writer
	buf []byte
}

const textChunk = 32 << 10

// backendFamily writes perBackend[i] of backends as expfmt's
// MetricFamilyToText would write its dto family: the family's names need
// no escaping in any of the negotiable escaping schemes; a backend's name,
// a label value, has its backslashes, newlines and double quotes escaped.
func (t *textWriter) backendFamily(i int, backends []luaapi.BackendMetrics) error {
	f := perBackend[i]
	if t.buf == nil {
		t.buf = make([]byte, 0, textChunk+1024)
	}
	b := t.buf[:0]
	b = append(b, "# HELP "...)
	b = append(b, f.name...)
	b = append(b, ' ')
	b = appendEscaped(b, f.help, false)
	b = append(b, "\n# TYPE "...)
	b = append(b, f.name...)
	b = append(b, ' ')
	b = append(b, strings.ToLower(f.typ.String())...)
	b = append(b, '\n')
	for _, backend := range backends {
		b = append(b, f.name...)
		b = append(b, "{"+backendLabel+`="`...)
		b = appendEscaped(b, backend.Name, true)
		b = append(b, `"} `...)
		b = appendFloat(b, f.value(backend))
		b = append(b, '\n')
		if len(b) >= textChunk {
			if _, err := t.out.Write(b); err != nil {
				return err
			}
			b = b[:0]
		}
	}
	_, err := t.out.Write(b)
	t.buf = b[:0]
	return err
}

// appendEscaped appends s with backslashes and newlines escaped, and
// double quotes with quotes, as the text format wants a label value (and
// a help text without quotes).
func appendEscaped(b []byte, s string, quotes bool) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			b = append(b, `\\`...)
		case c == '\n':
			b = append(b, `\n`...)
		case c == '"' && quotes:
			b = append(b, `\"`...)
		default:
			b = append(b, c)
		}
	}
	return b
}

// appendFloat appends v as the text format writes a sample's value.
func appendFloat(b []byte, v float64) []byte {
	switch {
	case v == 0: // -0 too
		return append(b, '0')
	case math.IsNaN(v):
		return append(b, "NaN"...)
	case math.IsInf(v, +1):
		return append(b, "+Inf"...)
	case math.IsInf(v, -1):
		return append(b, "-Inf"...)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}
