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
	families := slices.Clone(g.families)
	text := textWriter{out: out}
	var written []textFamily // written here, not by expfmt
	if g.lua != nil {
		families = append(families, g.lua.singleFamilies()...)
		if backends := g.lua.backends; backends.Len() > 0 {
			for i := range perBackend {
				written = append(written, textFamily{perBackend[i].name, func() error { return text.backendFamily(i, backends) }})
			}
		}
	}
	if g.requests != nil {
		dropped, err := g.ingressNginx.requestFamilies(g.requests, false)
		if err != nil {
			handlerErrors.WithLabelValues("gathering").Inc()
		}
		families = append(families, dropped...)
		written = append(written, g.ingressNginx.requestText(&text, g.requests)...)
	}
	slices.SortFunc(families, byFamilyName)
	slices.SortFunc(written, func(a, b textFamily) int { return strings.Compare(a.name, b.name) })
	for _, f := range families {
		for ; len(written) > 0 && written[0].name < f.GetName(); written = written[1:] {
			failed(written[0].write())
		}
		failed(enc.Encode(f))
	}
	for _, f := range written {
		failed(f.write())
	}
}

// textFamily is a family serveText writes itself, in its place by name.
type textFamily struct {
	name  string
	write func() error
}

// textWriter writes families in the text format, in chunks of textChunk
// bytes.
type textWriter struct {
	out io.Writer
	buf []byte
	err error // the first write's that failed, for the family under way
}

const textChunk = 32 << 10

// header starts a family: its HELP and TYPE lines.
func (t *textWriter) header(name, help, typ string) {
	if t.buf == nil {
		t.buf = make([]byte, 0, textChunk+1024)
	}
	t.buf = append(t.buf, "# HELP "...)
	t.buf = append(t.buf, name...)
	t.buf = append(t.buf, ' ')
	t.buf = appendEscaped(t.buf, help, false)
	t.buf = append(t.buf, "\n# TYPE "...)
	t.buf = append(t.buf, name...)
	t.buf = append(t.buf, ' ')
	t.buf = append(t.buf, typ...)
	t.buf = append(t.buf, '\n')
}

// sample writes one line: name, its labels (written already, escaped,
// sorted by name), le when not nil, and v.
func (t *textWriter) sample(name, suffix, labels string, le *float64, v float64) {
	t.buf = append(t.buf, name...)
	t.buf = append(t.buf, suffix...)
	t.buf = append(t.buf, '{')
	t.buf = append(t.buf, labels...)
	if le != nil {
		t.buf = append(t.buf, `,le="`...)
		t.buf = appendFloat(t.buf, *le)
		t.buf = append(t.buf, '"')
	}
	t.buf = append(t.buf, "} "...)
	t.buf = appendFloat(t.buf, v)
	t.buf = append(t.buf, '\n')
	t.flushFull()
}

// flushFull writes the buffer once it holds a chunk.
func (t *textWriter) flushFull() {
	if len(t.buf) >= textChunk {
		t.flush()
	}
}

// flush writes what is buffered, and ends the family: it returns the
// first error writing it.
func (t *textWriter) flush() error {
	if t.err == nil && len(t.buf) > 0 {
		_, t.err = t.out.Write(t.buf)
	}
	t.buf = t.buf[:0]
	return t.err
}

// end ends a family, returning its first error writing.
func (t *textWriter) end() error {
	err := t.flush()
	t.err = nil
	return err
}

// backendFamily writes perBackend[i] of backends as expfmt's
// MetricFamilyToText would write its dto family: the family's names need
// no escaping in any of the negotiable escaping schemes; a backend's name,
// a label value, has its backslashes, newlines and double quotes escaped.
func (t *textWriter) backendFamily(i int, backends luaapi.BackendList) error {
	f := perBackend[i]
	t.header(f.name, f.help, strings.ToLower(f.typ.String()))
	for backend := range backends.All() {
		t.buf = append(t.buf, f.name...)
		t.buf = append(t.buf, "{"+backendLabel+`="`...)
		t.buf = appendEscaped(t.buf, backend.Name, true)
		t.buf = append(t.buf, `"} `...)
		t.buf = appendFloat(t.buf, f.value(backend))
		t.buf = append(t.buf, '\n')
		t.flushFull()
	}
	return t.end()
}

// requestText are the request families of rs for serveText to write,
// as expfmt would write those requestFamilies makes: a family without
// series left out, series sorted as the registry sorts them (aggregate),
// labels sorted by name, the constant ones among them, a histogram's
// counts as the uint64 a const histogram holds.
func (c *ingressNginxCollector) requestText(t *textWriter, rs *requestScrape) []textFamily {
	if rs.err != nil || len(rs.series) == 0 {
		return nil
	}
	consts := []string{"controller_class", c.opts.Class, "controller_namespace", c.opts.Namespace, "controller_pod", c.opts.Pod}
	labels := labelTexts(rs.series, requestLabelNames(c.opts.PerHost), consts)
	name := func(n string) string { return prometheus.BuildFQName(IngressNginxNamespace, "", n) }
	var out []textFamily
	if c.requests != nil {
		out = append(out, textFamily{name("requests"), func() error {
			t.header(name("requests"), requestsHelp, "counter")
			for i, s := range rs.series {
				t.sample(name("requests"), "", labels[i], nil, s.values[0])
			}
			return t.end()
		}})
	}
	at := 1
	for i, h := range requestHistograms {
		first, bounds := at, rs.bounds[i]
		at += 2 + len(bounds)
		if c.histograms[i] == nil || !slices.ContainsFunc(rs.series, func(s *requestSeries) bool { return s.values[first] > 0 }) {
			continue
		}
		out = append(out, textFamily{name(h.name), func() error {
			n := name(h.name)
			t.header(n, h.help, "histogram")
			for j, s := range rs.series {
				count, sum := s.values[first], s.values[first+1]
				if count <= 0 {
					continue
				}
				cumulative := 0.0
				for k := range bounds {
					cumulative += s.values[first+2+k]
					t.sample(n, "_bucket", labels[j], &bounds[k], float64(uint64(cumulative)))
				}
				inf := math.Inf(+1)
				t.sample(n, "_bucket", labels[j], &inf, float64(uint64(count)))
				t.sample(n, "_sum", labels[j], nil, sum)
				t.sample(n, "_count", labels[j], nil, float64(uint64(count)))
			}
			return t.end()
		}})
	}
	if c.latency != nil && len(rs.latency) > 0 {
		latency := labelTexts(rs.latency, latencyLabels, consts)
		out = append(out, textFamily{name("ingress_upstream_latency_seconds"), func() error {
			n := name("ingress_upstream_latency_seconds")
			t.header(n, latencyHelp, "summary")
			for i, s := range rs.latency {
				t.sample(n, "_sum", latency[i], nil, s.values[1])
				t.sample(n, "_count", latency[i], nil, float64(uint64(s.values[0])))
			}
			return t.end()
		}})
	}
	return out
}

// labelTexts are each series' labels as the text format writes them
// between braces, with the constant ones (name, value, name, value…),
// sorted by name.
func labelTexts(series []*requestSeries, names, consts []string) []string {
	type label struct {
		name  string
		index int // in a series' labels; -1 - i for consts[2*i+1]
	}
	var all []label
	for i, n := range names {
		all = append(all, label{n, i})
	}
	for i := 0; i < len(consts); i += 2 {
		all = append(all, label{consts[i], -1 - i/2})
	}
	slices.SortFunc(all, func(a, b label) int { return strings.Compare(a.name, b.name) })
	out := make([]string, len(series))
	var b []byte
	for i, s := range series {
		b = b[:0]
		for j, l := range all {
			if j > 0 {
				b = append(b, ',')
			}
			v := ""
			if l.index >= 0 {
				v = s.labels[l.index]
			} else {
				v = consts[2*(-1-l.index)+1]
			}
			b = append(b, l.name...)
			b = append(b, `="`...)
			b = appendEscaped(b, v, true)
			b = append(b, '"')
		}
		out[i] = string(b)
	}
	return out
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
