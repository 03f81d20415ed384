package chars

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestCheck(t *testing.T) {
	tests := []struct {
		name, in string
		want     string // "" accepts; else a part of the reason
		wantText string // CheckText's, when it differs
	}{
		{"ascii", `add_header X-A "a b"; $host /x?y=1`, "", ""},
		{"empty", "", "", ""},
		{"latin and cjk", "café ü 日本 😀", "", ""},
		{"replacement character as written", "a\uFFFDb", "", ""},
		{"private use", "\uE000", "", ""},
		{"NUL", "a\x00b", "control character U+0000 at byte 1", ""},
		{"tab", "a\tb", "control character U+0009 at byte 1", "-"},
		{"LF", "a\nb", "control character U+000A", "-"},
		{"CR", "a\rb", "control character U+000D", "-"},
		{"ESC", "\x1b[31m", "control character U+001B at byte 0", ""},
		{"DEL", "a\x7fb", "control character U+007F", ""},
		{"C1 NEL (the issue's payload)", "add_header X-A \"a\u0085b\";", "C1 control character U+0085 at byte 17", ""},
		{"C1 first", "\u0080", "C1 control character U+0080", ""},
		{"C1 last", "\u009f", "C1 control character U+009F", ""},
		{"U+00A0 is not C1", "a\u00a0b", "", ""},
		{"line separator", "a\u2028b", "line separator U+2028", ""},
		{"paragraph separator", "a\u2029b", "paragraph separator U+2029", ""},
		{"RLO", "user\u202etxt.exe", "bidirectional control U+202E", ""},
		{"LRE", "\u202a", "bidirectional control U+202A", ""},
		{"RLI", "\u2067x\u2069", "bidirectional control U+2067", ""},
		{"PDI", "\u2069", "bidirectional control U+2069", ""},
		{"zero-width space", "ad\u200bmin", "invisible format character U+200B", ""},
		{"RLM", "\u200f", "invisible format character U+200F", ""},
		{"BOM", "\ufeffx", "invisible format character U+FEFF", ""},
		{"soft hyphen", "a\u00adb", "invisible format character U+00AD", ""},
		{"tag character", "a\U000E0041", "invisible format character U+E0041", ""},
		{"invalid byte", "a\xffb", "not valid UTF-8 at byte 1", ""},
		{"lone continuation", "\x80", "not valid UTF-8 at byte 0", ""},
		{"truncated", "ab\xe2\x80", "not valid UTF-8 at byte 2", ""},
		{"encoded surrogate D800", "a\xed\xa0\x80", "not valid UTF-8 at byte 1", ""},
		{"encoded surrogate DFFF", "\xed\xbf\xbf", "not valid UTF-8 at byte 0", ""},
		{"CESU pair", "\xed\xa0\xbd\xed\xb8\x80", "not valid UTF-8", ""},
		{"overlong slash", "\xc0\xaf", "not valid UTF-8", ""},
		{"overlong NUL", "\xc0\x80", "not valid UTF-8", ""},
		{"beyond U+10FFFF", "\xf4\x90\x80\x80", "not valid UTF-8", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertReason(t, "Check", Check(tt.in), tt.want)
			wantText := tt.want
			if tt.wantText == "-" {
				wantText = ""
			} else if tt.wantText != "" {
				wantText = tt.wantText
			}
			assertReason(t, "CheckText", CheckText(tt.in), wantText)
		})
	}
}

func assertReason(t *testing.T, fn string, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf("%s: %v, want accepted", fn, err)
	case want != "" && err == nil:
		t.Errorf("%s: accepted, want %q", fn, want)
	case want != "" && !strings.Contains(err.Error(), want):
		t.Errorf("%s: %q, want it to contain %q", fn, err, want)
	}
}

// TestCheckEveryRune holds Check to its rule for every code point: refused
// exactly when it is a control, a separator of lines or paragraphs, or a
// format character.
func TestCheckEveryRune(t *testing.T) {
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if r >= 0xd800 && r <= 0xdfff {
			continue // not encodable in UTF-8; see the surrogate cases
		}
		want := unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r) || r == 0x2028 || r == 0x2029
		if got := Check(string(r)) != nil; got != want {
			t.Fatalf("Check(%U) refused=%t, want %t", r, got, want)
		}
	}
}

func FuzzCheck(f *testing.F) {
	for _, s := range []string{"", "a", "a\u0085b", "\xed\xa0\x80", "\u202e", "a\tb\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := Check(s)
		if err == nil {
			if !utf8.ValidString(s) {
				t.Fatalf("accepted invalid UTF-8 %q", s)
			}
			for _, r := range s {
				if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == 0x2028 || r == 0x2029 {
					t.Fatalf("accepted %U in %q", r, s)
				}
			}
		}
		if err == nil && CheckText(s) != nil {
			t.Fatalf("CheckText refused %q, which Check accepts", s)
		}
	})
}
