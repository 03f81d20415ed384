package render

import (
	"fmt"
	"strings"

	"github.com/restysync/restysync/agent/internal/model"
)

// Custom response headers of a location's profile
// (model.ProxySettings.ResponseHeaders; model/responseheaders.go reads
// them).
//
// add_header and *_hide_header in a location replace every one nginx
// would inherit from the http block, so a profile with headers of its own
// repeats those (the template's "response-headers"; keep it in step with
// the http block).

// responseHeaderView is one custom response header; Value may hold
// ${restysync_dollar} for a literal "$".
type responseHeaderView struct{ Name, Value string }

// addResponseHeaders derives the response header part of v from p.
func addResponseHeaders(v *proxyView, p model.ProxySettings) error {
	if p.ResponseHeaders != "" {
		for _, line := range strings.Split(p.ResponseHeaders, "\n") {
			name, value, ok := strings.Cut(line, ": ")
			if !ok || !isHeaderName(name) {
				return fmt.Errorf("response header %q", line)
			}
			if _, err := QuoteWithVariables(value); err != nil {
				return fmt.Errorf("response header %s: %w", name, err)
			}
			if strings.Contains(strings.ReplaceAll(value, "${restysync_dollar}", ""), "${") {
				return fmt.Errorf("response header %s: a variable other than ${restysync_dollar}", name)
			}
			switch strings.ToLower(name) {
			case "x-request-id":
				v.OwnRequestID = true
			case "strict-transport-security":
				v.OwnSTS = true
			default:
				v.ResponseHides = append(v.ResponseHides, name)
			}
			v.ResponseHeaderList = append(v.ResponseHeaderList, responseHeaderView{Name: name, Value: value})
		}
	}
	return nil
}
