package configmap

import (
	"fmt"
	"strings"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/snippet"
)

// The ConfigMap's snippet keys, read as typed directives (package
// snippet): http-snippet, server-snippet and location-snippet may hold
// headers, which apply to every location (model.GlobalSnippets), and
// server_tokens off, which is the key server-tokens' setting (the key wins
// when both are set and disagree). One directive off the allowlist refuses
// the whole key, naming the directive and why. allow-snippet-annotations
// "false" refuses every snippet annotation, as --allow-snippet-annotations
// =false does; either one turns them off.

// allowSnippetAnnotations is the key that turns snippet annotations off.
const allowSnippetAnnotations = "allow-snippet-annotations"

// snippetKeys are the snippet keys read, in the order their headers
// apply (a later one wins a header of the same name).
var snippetKeys = []string{"http-snippet", model.ServerSnippetKey, "location-snippet"}

// applySnippetKeys reads allow-snippet-annotations and the snippet keys
// of data into status and problems; it returns whether snippet
// annotations are turned off and the snippets the model applies.
func applySnippetKeys(a *applier, data map[string]string, status map[string]Key, problem func(key, reason string)) (bool, model.GlobalSnippets) {
	off := false
	if value, ok := data[allowSnippetAnnotations]; ok {
		allow, reason := boolean(strings.TrimSpace(value))
		if reason != "" {
			reason = fmt.Sprintf("%q %s; snippet annotations stay allowed", clip(value), reason)
			status[allowSnippetAnnotations] = Key{Key: allowSnippetAnnotations, Status: StatusInvalid, Reason: reason}
			problem(allowSnippetAnnotations, reason)
		} else {
			off = !allow
			status[allowSnippetAnnotations] = Key{Key: allowSnippetAnnotations, Status: StatusSupported}
		}
	}
	var texts [3]string
	tokensOff := ""
	for i, key := range snippetKeys {
		text, ok := data[key]
		if !ok {
			continue
		}
		res, refusal := snippet.Parse(snippet.Global, text, snippet.Options{})
		if refusal != nil {
			reason := "refused: " + refusal.Error() + "; the snippet is ignored"
			status[key] = Key{Key: key, Status: StatusRefused, Reason: reason}
			problem(key, reason)
			continue
		}
		status[key] = Key{Key: key, Status: StatusSupported}
		texts[i] = text
		if res.ServerTokensOff && tokensOff == "" {
			tokensOff = key
		}
	}
	if tokensOff != "" {
		if status["server-tokens"].Status == StatusSupported && a.h.ServerTokens {
			reason := `server_tokens off disagrees with the key server-tokens "true"; server-tokens is used`
			status[tokensOff] = Key{Key: tokensOff, Status: StatusInvalid, Reason: reason}
			problem(tokensOff, reason)
		} else {
			a.h.ServerTokens = false
		}
	}
	return off, model.GlobalSnippets{HTTP: texts[0], Server: texts[1], Location: texts[2]}
}
