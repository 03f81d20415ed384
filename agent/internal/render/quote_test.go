package render

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/restysync/restysync/agent/internal/chars"
	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
)

// trickyStrings are strings that mean something to nginx's config parser
// or to a human reading the config.
var trickyStrings = []string{
	"",
	"plain",
	"ns/svc:80",
	`a"b`,
	`"`,
	`""`,
	`\`,
	`a\`,
	`\"`,
	`\\"`,
	`a\nb`, // a backslash and an n, not a newline
	`a\tb`,
	`\'`,
	"'single'",
	"semi;colon",
	"{braces}",
	"# not a comment",
	"spaces  and\u00a0nbsp",
	"/path/with/ünïcödé/日本",
	"\uFFFD literal replacement character",
	"percent%20encoded",
	`C:\dir\file`,
}

func TestQuoteTable(t *testing.T) {
	for _, s := range trickyStrings {
		t.Run(s, func(t *testing.T) {
			q, err := Quote(s)
			if err != nil {
				t.Fatalf("Quote(%q): %v", s, err)
			}
			got, err := nginxToken(q)
			if err != nil {
				t.Fatalf("Quote(%q) = %s: %v", s, q, err)
			}
			if got != s {
				t.Fatalf("Quote(%q) = %s, which nginx reads as %q", s, q, got)
			}
		})
	}
}

func TestQuoteRejects(t *testing.T) {
	for _, s := range []string{"$", "a$b", "${x}", "a\nb", "a\rb", "a\tb", "nul\x00", "del\x7f", "c1\u0085", "bad\xffutf8"} {
		t.Run(fmt.Sprintf("%q", s), func(t *testing.T) {
			if q, err := Quote(s); err == nil {
				t.Fatalf("Quote(%q) = %s, want an error", s, q)
			} else if !strings.Contains(err.Error(), fmt.Sprintf("%q", s)) {
				t.Fatalf("error %q does not name the string", err)
			}
		})
	}
}

// FuzzQuote checks Quote against a Go model of nginx's token reader: what
// Quote accepts reads back as the input, as one token; what it rejects holds
// '$' or what package chars refuses (a control character, C1 included,
// U+2028/U+2029, a bidi or other format character, invalid UTF-8).
func FuzzQuote(f *testing.F) {
	for _, s := range trickyStrings {
		f.Add(s)
	}
	f.Add("a$b")
	f.Add("line\nbreak")
	f.Add("\xff")
	for _, s := range []string{"a\u0085b", "\u0080", "\u009f", "a\u2028b", "\u2029", "\u202eabc", "\u2066x\u2069", "\u200b", "\ufeff",
		"\xed\xa0\x80", "\xed\xbf\xbf", "\xc0\xaf", "\xf4\x90\x80\x80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q, err := Quote(s)
		if err != nil {
			if !strings.Contains(s, "$") && chars.Check(s) == nil {
				t.Fatalf("Quote(%q) rejected a harmless string: %v", s, err)
			}
			return
		}
		if chars.Check(s) != nil || !utf8.ValidString(s) || strings.ContainsFunc(s, unicode.IsControl) {
			t.Fatalf("Quote(%q) accepted what package chars refuses", s)
		}
		if strings.ContainsAny(q, "\n\r$") {
			t.Fatalf("Quote(%q) = %s holds a newline or '$'", s, q)
		}
		got, err := nginxToken(q)
		if err != nil {
			t.Fatalf("Quote(%q) = %s: %v", s, q, err)
		}
		if got != s {
			t.Fatalf("Quote(%q) = %s, which nginx reads as %q", s, q, got)
		}
	})
}

// nginxToken reads q the way ngx_conf_read_token reads a double-quoted
// token followed by ';': the token must end at the last byte of q, and
// "\"", "\'", "\\" lose their backslash, "\t", "\r", "\n" become control
// characters, and any other backslash stays.
func nginxToken(q string) (string, error) {
	line := q + ";"
	if line[0] != '"' {
		return "", fmt.Errorf("does not start with '\"'")
	}
	end := -1
	escaped := false
	for i := 1; i < len(line); i++ {
		if escaped {
			escaped = false
			continue
		}
		if line[i] == '\\' {
			escaped = true
			continue
		}
		if line[i] == '"' {
			end = i
			break
		}
	}
	if end != len(q)-1 {
		return "", fmt.Errorf("the quoted token ends at byte %d, not at the end (%d)", end, len(q)-1)
	}
	raw := q[1:end]
	var b strings.Builder
	for i := 0; i < len(raw); i++ {
		if raw[i] == '\\' && i+1 < len(raw) {
			switch raw[i+1] {
			case '"', '\'', '\\':
				i++
			case 't':
				b.WriteByte('\t')
				i++
				continue
			case 'r':
				b.WriteByte('\r')
				i++
				continue
			case 'n':
				b.WriteByte('\n')
				i++
				continue
			}
		}
		b.WriteByte(raw[i])
	}
	return b.String(), nil
}

// TestQuoteRealNginx proves the round trip with the real parser: each
// tricky string becomes the value of a set directive, and nginx answers a
// request with exactly that value.
func TestQuoteRealNginx(t *testing.T) {
	nginxproc.Binary(t)
	prefix := nginxproc.TempPrefix(t)
	port := nginxproc.FreePort(t)

	var conf strings.Builder
	fmt.Fprintf(&conf, "pid nginx.pid;\nerror_log logs/error.log notice;\nevents {}\nhttp {\n")
	fmt.Fprintf(&conf, "    client_body_temp_path tmp/client_body;\n    proxy_temp_path tmp/proxy;\n    fastcgi_temp_path tmp/fastcgi;\n    uwsgi_temp_path tmp/uwsgi;\n    scgi_temp_path tmp/scgi;\n    access_log off;\n")
	// nginxproc waits for GET /status on the API socket.
	fmt.Fprintf(&conf, "    server { listen \"unix:%s\"; location = /status { return 200; } }\n", filepath.Join(prefix, SocketName))
	fmt.Fprintf(&conf, "    server {\n        listen 127.0.0.1:%d;\n", port)
	for i, s := range trickyStrings {
		q, err := Quote(s)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&conf, "        location = /%d { set $value %s; return 200 $value; }\n", i, q)
	}
	fmt.Fprintf(&conf, "    }\n}\n")
	if err := os.WriteFile(filepath.Join(prefix, ConfigName), []byte(conf.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := nginxproc.Test(t, prefix); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	nginxproc.Start(t, prefix)

	client := &http.Client{Timeout: 5 * time.Second}
	for i, s := range trickyStrings {
		t.Run(s, func(t *testing.T) {
			resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d/%d", port, i))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if string(body) != s {
				t.Fatalf("nginx read %s as %q, want %q", mustQuote(t, s), body, s)
			}
		})
	}
}

func mustQuote(t *testing.T, s string) string {
	t.Helper()
	q, err := Quote(s)
	if err != nil {
		t.Fatal(err)
	}
	return q
}
