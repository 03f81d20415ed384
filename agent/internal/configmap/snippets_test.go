package configmap

import (
	"strings"
	"testing"

	"github.com/restysync/restysync/agent/internal/model"
)

func TestSnippetKeys(t *testing.T) {
	r := Apply(flags, "ns", "cm", map[string]string{
		"http-snippet":              "add_header X-Frame-Options DENY always;\nserver_tokens off;",
		"server-snippet":            "more_clear_headers X-Powered-By;",
		"location-snippet":          "alias /etc;",
		"allow-snippet-annotations": "false",
		"server-tokens":             "true",
	})
	status := map[string]Key{}
	for _, k := range r.Keys {
		status[k.Key] = k
	}
	if k := status["location-snippet"]; k.Status != StatusRefused || !strings.Contains(k.Reason, "alias (line 1): reads files outside the config (CVE-2021-25742)") {
		t.Errorf("location-snippet: %+v", k)
	}
	if k := status["server-snippet"]; k.Status != StatusSupported {
		t.Errorf("server-snippet: %+v", k)
	}
	// server_tokens off disagrees with server-tokens "true": the key wins.
	if k := status["http-snippet"]; k.Status != StatusInvalid || !r.Render.HTTP.ServerTokens {
		t.Errorf("http-snippet: %+v, server tokens %t", k, r.Render.HTTP.ServerTokens)
	}
	if k := status["allow-snippet-annotations"]; k.Status != StatusSupported || !r.SnippetAnnotationsOff {
		t.Errorf("allow-snippet-annotations: %+v, off %t", k, r.SnippetAnnotationsOff)
	}
	want := model.GlobalSnippets{HTTP: "add_header X-Frame-Options DENY always;\nserver_tokens off;", Server: "more_clear_headers X-Powered-By;"}
	if r.GlobalSnippets != want {
		t.Errorf("global snippets %+v, want %+v", r.GlobalSnippets, want)
	}

	r = Apply(flags, "ns", "cm", map[string]string{"http-snippet": "server_tokens off;"})
	if r.Render.HTTP.ServerTokens || len(r.Problems) != 0 || r.SnippetAnnotationsOff {
		t.Errorf("server_tokens off alone: tokens %t, problems %v", r.Render.HTTP.ServerTokens, r.Problems)
	}
}
