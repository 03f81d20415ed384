package apply_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
	"github.com/restysync/restysync/lua"
)

// luaTestDir holds the Lua unit tests, lua/test/<module>_test.lua, and
// their harness testing.lua.
const luaTestDir = "../../../lua/test"

// luaUnitConf is the nginx.conf of the Lua unit tests: the modules the
// agent ships (lua.WriteTo) and the test folder on the package path, the
// two shared dicts under their real names, restysync.init in the master
// as in the agent's nginx.conf, and one location that runs a test file.
// Format arguments: the load_module lines, the prefix.
const luaUnitConf = `%s
pid nginx.pid;
error_log logs/error.log;
events {
    worker_connections 64;
}
http {
    access_log off;
    lua_package_path "%[2]s/lua/?.lua;%[2]s/lua/?/init.lua;%[2]s/luatest/?.lua;;";
    lua_shared_dict restysync 1m;
    lua_shared_dict restysync_metrics 1m;
    lua_shared_dict restysync_test_small 32k;
    init_by_lua_block {
        require("restysync").init("luaunit")
    }
    init_worker_by_lua_block {
        require("restysync").init_worker()
    }
    server {
        listen unix:%[2]s/restysync.sock;
        location = /status {
            return 200;
        }
        location = /run {
            default_type application/json;
            content_by_lua_block {
                ngx.print(require("testing").run(ngx.var.arg_file))
            }
        }
    }
}
`

// luaUnitResult is what testing.run answers for one test file.
type luaUnitResult struct {
	Error string `json:"error"`
	Tests []struct {
		Name  string `json:"name"`
		Error string `json:"error"`
	} `json:"tests"`
}

// TestLuaUnit runs every lua/test/<module>_test.lua in a real nginx and
// reports each of its functions as the subtest <module>/<function>.
func TestLuaUnit(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(luaTestDir, "*_test.lua"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no *_test.lua in %s", luaTestDir)
	}
	n := startLuaUnitNginx(t)
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".lua")
		t.Run(strings.TrimSuffix(name, "_test"), func(t *testing.T) {
			var result luaUnitResult
			getJSON(t, n.API(), "http://restysync/run?file="+url.QueryEscape(name), &result)
			if result.Error != "" {
				t.Fatalf("%s: %s", file, result.Error)
			}
			for _, test := range result.Tests {
				t.Run(test.Name, func(t *testing.T) {
					if test.Error != "" {
						t.Error(test.Error)
					}
				})
			}
		})
	}
}

// startLuaUnitNginx writes the shipped modules, the test folder and
// luaUnitConf into a new prefix and starts nginx there.
func startLuaUnitNginx(t *testing.T) *nginxproc.Nginx {
	t.Helper()
	nginxproc.Binary(t)
	prefix := nginxproc.TempPrefix(t)
	if err := lua.WriteTo(prefix, os.WriteFile); err != nil {
		t.Fatal(err)
	}
	// A copy: nginx's workers may run as nobody, who may not read the
	// checkout.
	testDir := filepath.Join(prefix, "luatest")
	if err := os.Mkdir(testDir, 0o755); err != nil {
		t.Fatal(err)
	}
	sources, err := filepath.Glob(filepath.Join(luaTestDir, "*.lua"))
	if err != nil {
		t.Fatal(err)
	}
	for _, src := range sources {
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(testDir, filepath.Base(src)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var loads strings.Builder
	for _, m := range nginxproc.DebianLoadModules() {
		fmt.Fprintf(&loads, "load_module %s;\n", m)
	}
	conf := fmt.Sprintf(luaUnitConf, loads.String(), prefix)
	if err := os.WriteFile(filepath.Join(prefix, "nginx.conf"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	n := nginxproc.Start(t, prefix)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(n.Logs())
		}
	})
	return n
}

func getJSON(t *testing.T, client *http.Client, url string, v any) {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s\n%s", url, resp.Status, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: %v\n%s", url, err, body)
	}
}
