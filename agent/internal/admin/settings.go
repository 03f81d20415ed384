package admin

import (
	"fmt"
	"reflect"
	"strings"
	"unicode"

	"github.com/restysync/restysync/agent/internal/model"
)

// A path's effective settings, for inspect: every setting its location
// carries that is not the default, read from the model by reflection
// rather than listed by hand, so that a setting added to the model shows
// without a change here. The model's zero value is the default (a zero
// timeout keeps the default server's, an empty body size the http
// block's), so "not zero" is "set".

// maxSettingValue clips a long value (a snippet's lines, a CORS list).
const maxSettingValue = 60

// pathSettings lists what l sets, "name value" (a bool "name" alone),
// names in kebab case from the model's fields, nested structs joined
// ("basic-auth-realm"); profile first, when the location has one, and
// the balancing of its backend (policy) last.
func pathSettings(l model.Location, profile string, policy model.Policy) []string {
	var out []string
	if profile != "" {
		out = append(out, "profile "+profile)
	}
	if l.Protocol != "" {
		out = append(out, "backend-protocol "+l.Protocol)
	}
	if l.SSLRedirect {
		out = append(out, model.KeySSLRedirect)
	}
	for _, part := range []any{l.ProxySettings(), l.AccessSettings(), l.SnippetSettings(), policy} {
		out = appendSettings(out, "", reflect.ValueOf(part))
	}
	return out
}

// appendSettings appends the fields of struct v that are not zero.
func appendSettings(out []string, prefix string, v reflect.Value) []string {
	t := v.Type()
	for i := range t.NumField() {
		field, value := t.Field(i), v.Field(i)
		if !field.IsExported() || value.IsZero() {
			continue
		}
		name := prefix + kebab(field.Name)
		for value.Kind() == reflect.Pointer {
			value = value.Elem()
		}
		switch value.Kind() {
		case reflect.Struct:
			out = appendSettings(out, name+"-", value)
		case reflect.Bool:
			out = append(out, name)
		default:
			text := fmt.Sprint(value.Interface())
			if len(text) > maxSettingValue {
				text = text[:maxSettingValue] + "…"
			}
			out = append(out, name+" "+strings.ReplaceAll(text, "\n", "; "))
		}
	}
	return out
}

// kebab turns a Go field name into kebab case: "BodySize" is "body-size",
// "HTTPVersion" "http-version", "SSL" "ssl".
func kebab(name string) string {
	runes := []rune(name)
	var b strings.Builder
	for i, r := range runes {
		if unicode.IsUpper(r) && i > 0 {
			prevLower := unicode.IsLower(runes[i-1]) || unicode.IsDigit(runes[i-1])
			acronymEnd := unicode.IsUpper(runes[i-1]) && i+1 < len(runes) && unicode.IsLower(runes[i+1])
			if prevLower || acronymEnd {
				b.WriteByte('-')
			}
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}
