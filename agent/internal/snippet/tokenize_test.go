package snippet

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/restysync/restysync/agent/internal/chars"
)

func TestTokenize(t *testing.T) {
	tests := []struct {
		name string
		text string
		want []Directive
	}{
		{"empty", "", nil},
		{"blank lines", "\n\n  \t\n", nil},
		{"comment only", "# nothing here; { }\n", nil},
		{"words", "add_header X-A b always;", []Directive{{Name: "add_header", Args: []string{"X-A", "b", "always"}, Line: 1}}},
		{"double quotes", `more_set_headers "Request-Id: $req_id";`,
			[]Directive{{Name: "more_set_headers", Args: []string{"Request-Id: $req_id"}, Line: 1}}},
		{"single quotes keep double ones", `return 200 '[{"a": "b"}]';`,
			[]Directive{{Name: "return", Args: []string{"200", `[{"a": "b"}]`}, Line: 1}}},
		{"escapes", `x "a\"b\\c\n\r\t\q";`, []Directive{{Name: "x", Args: []string{"a\"b\\c\n\r\t\\q"}, Line: 1}}},
		{"escaped quote in single quotes", `x 'it\'s';`, []Directive{{Name: "x", Args: []string{"it's"}, Line: 1}}},
		{"semicolon and braces inside quotes", `x "a;b}c{d";`, []Directive{{Name: "x", Args: []string{"a;b}c{d"}, Line: 1}}},
		{"variables stay", `proxy_set_header X ${host}$uri;`, []Directive{{Name: "proxy_set_header", Args: []string{"X", "${host}$uri"}, Line: 1}}},
		{"brace inside a word", `x a}b;`, []Directive{{Name: "x", Args: []string{"a}b"}, Line: 1}}},
		{"hash inside a word", `x a#b;`, []Directive{{Name: "x", Args: []string{"a#b"}, Line: 1}}},
		{"comment after a directive", "x a; # y b;\nz;", []Directive{{Name: "x", Args: []string{"a"}, Line: 1}, {Name: "z", Line: 2}}},
		{"escaped semicolon in a word", `x a\;b;`, []Directive{{Name: "x", Args: []string{`a\;b`}, Line: 1}}},
		{"empty string", `proxy_set_header Origin "";`, []Directive{{Name: "proxy_set_header", Args: []string{"Origin", ""}, Line: 1}}},
		{"block", "server_tokens off;\nlocation ~ ^/(ping|ready) {\n  deny all;\n  return 404;\n}\n", []Directive{
			{Name: "server_tokens", Args: []string{"off"}, Line: 1},
			{Name: "location", Args: []string{"~", "^/(ping|ready)"}, Line: 2, HasBlock: true, Block: []Directive{
				{Name: "deny", Args: []string{"all"}, Line: 3},
				{Name: "return", Args: []string{"404"}, Line: 4},
			}},
		}},
		{"empty block", "location /x {}", []Directive{{Name: "location", Args: []string{"/x"}, Line: 1, HasBlock: true}}},
		{"multi-line string counts lines", "x \"a\nb\";\ny;", []Directive{{Name: "x", Args: []string{"a\nb"}, Line: 1}, {Name: "y", Line: 3}}},
		{"CRLF line ends", "x a;\r\ny b;\r\n", []Directive{{Name: "x", Args: []string{"a"}, Line: 1}, {Name: "y", Args: []string{"b"}, Line: 2}}},
		{"quote in a word", `x a"b;`, []Directive{{Name: "x", Args: []string{`a"b`}, Line: 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Tokenize(tt.text)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %#v\nwant %#v", got, tt.want)
			}
		})
	}
}

func TestTokenizeErrors(t *testing.T) {
	tests := []struct {
		name, text string
		line       int
		want       string
	}{
		{"unterminated string", "x \"abc;\n", 1, "never closed"},
		{"no semicolon", "x a", 1, `does not end with ";"`},
		{"unclosed block", "location / {\n deny all;\n", 3, `no "}"`},
		{"stray close", "x;\n}", 2, "no block is open"},
		{"close after words", "location / { return 404 }", 1, `unexpected "}"`},
		{"semicolon alone", ";", 1, "no directive before it"},
		{"text after quote", `x "a"b;`, 1, "right after a quoted string"},
		{"too deep", strings.Repeat("a {", MaxDepth+1) + strings.Repeat("}", MaxDepth+1), 1, "nested more than"},
		{"too long", "x " + strings.Repeat("a", MaxBytes) + ";", 0, "bytes long"},
		{"too many directives", strings.Repeat("x;", MaxDirectives+1), 1, "more than 1024 directives"},
		{"too many arguments", "x" + strings.Repeat(" a", MaxArgs+2) + ";", 1, "arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Tokenize(tt.text)
			var syntax *SyntaxError
			if !errors.As(err, &syntax) {
				t.Fatalf("got %v, want a SyntaxError", err)
			}
			if syntax.Line != tt.line || !strings.Contains(syntax.Msg, tt.want) {
				t.Errorf("got line %d %q, want line %d and %q", syntax.Line, syntax.Msg, tt.line, tt.want)
			}
		})
	}
}

// withoutLines drops the lines, which Render does not keep.
func withoutLines(dirs []Directive) []Directive {
	out := make([]Directive, len(dirs))
	for i, d := range dirs {
		d.Line = 0
		d.Block = withoutLines(d.Block)
		if len(d.Block) == 0 {
			d.Block = nil
		}
		if len(d.Args) == 0 {
			d.Args = nil
		}
		out[i] = d
	}
	return out
}

// FuzzTokenize: Tokenize never panics, and what it reads, rendered and
// read again, is the same directives.
func FuzzTokenize(f *testing.F) {
	for _, seed := range []string{
		`more_set_headers "Request-Id: $req_id";`,
		"proxy_set_header Origin \"\";\nproxy_hide_header l5d-remote-ip;",
		"server_tokens off;\nlocation ~ ^/(ping|ready|prometheus) {\n  deny all;\n  return 404;\n}",
		`location /robots.txt { add_header Content-Type "text/plain"; return 200 "User-agent: *\nDisallow: /"; }`,
		"add_header X-Vuln \"Benign\\r\nHTTP/1.1 200 OK\";",
		`location ^~ "/test" { default_type 'text/plain'; alias /var/run; }`,
		`x a\;b "c\"d" 'e\'f' ${g}h}i # j`,
		"a { b { c; } }",
		"\"\";",
		// Characters no value may hold (package chars).
		"add_header X-A \"a\u0085b\";",
		"proxy_set_header X a\u2028b;",
		"location /x { return 200 \"\u2029\u202e\"; }",
		"more_set_headers \"X: \u2066y\u2069\";",
		"add_header X \"\xed\xa0\x80\";",
		"add_header X \"\xff\xc0\xaf\";",
		"add_header X \"a\u200bb\ufeff\";",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		dirs, err := Tokenize(text)
		if err != nil {
			return
		}
		rendered := renderText(dirs)
		again, err := Tokenize(rendered)
		if err != nil {
			t.Fatalf("the rendered form does not parse: %v\n%s", err, rendered)
		}
		if !reflect.DeepEqual(withoutLines(again), withoutLines(dirs)) {
			t.Fatalf("rendered and read again differs:\n%#v\n%#v\n%s", dirs, again, rendered)
		}
		if renderText(again) != rendered {
			t.Fatalf("rendering is not stable")
		}
		// The checker never panics either, and what it accepts holds only
		// characters package chars accepts (header values and names not
		// even a tab or a line break), so render can quote it.
		for _, ctx := range []Context{Configuration, Server, Auth, Global} {
			res, refusal := Check(ctx, dirs, Options{AuthVariables: map[string]string{"a": "restysync_set_1"}, BufferSettings: true})
			if refusal != nil {
				continue
			}
			for _, s := range stringsOf(reflect.ValueOf(res)) {
				if err := chars.CheckText(s); err != nil {
					t.Fatalf("accepted %q in %q: %v", s, text, err)
				}
			}
			for _, h := range append(append([]Header{}, res.RequestHeaders...), res.ResponseHeaders...) {
				for _, p := range append(Value{{Text: h.Name}}, h.Value...) {
					if err := chars.Check(p.Text); err != nil {
						t.Fatalf("accepted header %q: %v", h.Name, err)
					}
				}
			}
		}
	})
}

// stringsOf returns every string held in v, through structs, slices and maps.
func stringsOf(v reflect.Value) []string {
	switch v.Kind() {
	case reflect.String:
		return []string{v.String()}
	case reflect.Struct:
		var out []string
		for i := 0; i < v.NumField(); i++ {
			out = append(out, stringsOf(v.Field(i))...)
		}
		return out
	case reflect.Slice, reflect.Array:
		var out []string
		for i := 0; i < v.Len(); i++ {
			out = append(out, stringsOf(v.Index(i))...)
		}
		return out
	case reflect.Map:
		var out []string
		for _, k := range v.MapKeys() {
			out = append(out, stringsOf(k)...)
			out = append(out, stringsOf(v.MapIndex(k))...)
		}
		return out
	}
	return nil
}
