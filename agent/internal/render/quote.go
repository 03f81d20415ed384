package render

import (
	"errors"
	"fmt"
	"strings"

	"github.com/restysync/restysync/agent/internal/chars"
)

// Quote returns s as one double-quoted nginx token that nginx's config
// parser reads back as exactly s. It escapes '\' and '"', the only two
// characters that mean something inside double quotes. It rejects what no
// quoting makes safe: '$' (nginx expands variables inside quotes in
// directives such as set, and has no escape for '$'), and what package
// chars refuses (control characters including newlines, U+2028/U+2029,
// format characters, invalid UTF-8): the model refuses those with the same
// rule, so a value it accepted does not fail here.
//
// Quote is the one quoting function for every user-supplied string in
// nginx.conf; the template reaches it as "quote".
func Quote(s string) (string, error) {
	return quote(s, false)
}

// QuoteRegex is Quote for the regex of a location, where nginx expands no
// variables and '$' is the regex's end anchor: it lets '$' through.
func QuoteRegex(s string) (string, error) {
	return quote(s, true)
}

func quote(s string, dollarIsLiteral bool) (string, error) {
	if err := chars.Check(s); err != nil {
		return "", fmt.Errorf("%q: %w", s, err)
	}
	if !dollarIsLiteral && strings.Contains(s, "$") {
		return "", fmt.Errorf("%q: contains \"$\", which nginx would expand as a variable", s)
	}
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '"' || c == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	b.WriteByte('"')
	return b.String(), nil
}

// maxHostLength is the longest DNS name.
const maxHostLength = 253

// serverName returns the server_name token for a model host: the quoted
// name for an exact host, and for a wildcard "*.example.com" the quoted regex
// "~^[^.]+\.example\.com$". nginx's own "*.example.com" would match any
// number of labels, while an Ingress wildcard matches exactly one.
//
// The regex needs '$', which Quote rejects, so serverName builds the token
// itself from a host it has checked to hold only [a-z0-9.-]. nginx's parser
// drops a backslash only before a quote, a backslash, t, r or n, so "\."
// reaches the regex as written.
func serverName(host string) (string, error) {
	name, wildcard := strings.CutPrefix(host, "*.")
	if err := checkDNSName(name); err != nil {
		return "", fmt.Errorf("host %q: %w", host, err)
	}
	if !wildcard {
		return Quote(name)
	}
	return `"~^[^.]+\.` + strings.ReplaceAll(name, ".", `\.`) + `$"`, nil
}

// checkDNSName accepts lower-case DNS names: labels of [a-z0-9-] joined by
// dots. The model has checked hosts more strictly; this is the render
// stage's own guard, as server_name tokens are built without Quote.
func checkDNSName(name string) error {
	if name == "" {
		return errors.New("is empty")
	}
	if len(name) > maxHostLength {
		return fmt.Errorf("is %d bytes long, longer than %d", len(name), maxHostLength)
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" {
			return errors.New("has an empty label")
		}
		for _, r := range label {
			if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '-' {
				return fmt.Errorf("contains %q; want lower-case letters, digits, '-' and '.'", r)
			}
		}
	}
	return nil
}
