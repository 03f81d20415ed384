// Package chars is the one rule for the characters a user value may hold
// on its way into nginx.conf and Lua. It sits under every stage of the
// pipeline (source → model → render → plan → apply): the snippet checker
// and the model refuse a value with Check or CheckText, as a Problem that
// names the object and the key, and render's quote functions apply the same
// rule, so that a value the model accepted can never fail render (one bad
// value would otherwise stop the render of every tenant's config).
//
// A value must be valid UTF-8 (so no encoded surrogates, no overlong
// forms) and hold no control character (C0, DEL, C1), no line or paragraph
// separator (U+2028, U+2029) and no Unicode format character (category Cf:
// the bidirectional embeddings, overrides and isolates U+202A–U+202E and
// U+2066–U+2069, zero-width characters, soft hyphen, the byte order mark,
// tag characters). Format characters are refused as a class rather than
// the bidi ones alone: each is invisible, so it makes a value read
// differently from what nginx gets ("admin" with a zero-width space is not
// "admin"), and no header, URL or directive argument needs one.
//
// The package imports nothing of restysync, so that snippet, model, render
// and configmap can all use it.
package chars

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// Check returns nil, or why s holds a character no value may hold; the
// reason names the character and its byte offset.
func Check(s string) error {
	return check(s, false)
}

// CheckText is Check for multi-line text (a snippet, the body of a return):
// it lets a tab, CR and LF through, which nginx's parser reads inside a
// quoted string and render writes as the escapes \t, \r and \n.
func CheckText(s string) error {
	return check(s, true)
}

func check(s string, text bool) error {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 && !(text && (c == '\t' || c == '\r' || c == '\n')) || c == 0x7f {
				return fmt.Errorf("contains the control character %U at byte %d", rune(c), i)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size <= 1 {
			return fmt.Errorf("is not valid UTF-8 at byte %d", i)
		}
		if reason := refused(r); reason != "" {
			return fmt.Errorf("contains %s %U at byte %d", reason, r, i)
		}
		i += size
	}
	return nil
}

// refused names the class of a non-ASCII rune no value may hold, or "".
func refused(r rune) string {
	switch {
	case r >= 0x80 && r <= 0x9f:
		return "the C1 control character"
	case r == 0x2028:
		return "the line separator"
	case r == 0x2029:
		return "the paragraph separator"
	case r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069:
		return "the bidirectional control"
	case unicode.Is(unicode.Cf, r):
		return "the invisible format character"
	}
	return ""
}
