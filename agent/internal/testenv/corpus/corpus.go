// Package corpus finds the migration corpus, the real Ingresses users
// bring from ingress-nginx, for tests: test support, not a pipeline stage.
//
// The corpus lives beside the repository rather than in it (it is other
// projects' text).
package corpus

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Dir is the migration corpus: $RESTYSYNC_MIGRATION_CORPUS, else
// shared/migration-corpus beside the module's folder or one of its
// parents, or beside the repository a clone was made from (a clean clone
// in /tmp of the working repository). "" when there is none.
func Dir() string {
	if dir := os.Getenv("RESTYSYNC_MIGRATION_CORPUS"); dir != "" {
		return dir
	}
	var roots []string
	if gomod, err := exec.Command("go", "env", "GOMOD").Output(); err == nil {
		roots = append(roots, filepath.Dir(strings.TrimSpace(string(gomod))))
	}
	if origin, err := exec.Command("git", "config", "--get", "remote.origin.url").Output(); err == nil {
		if dir := strings.TrimSpace(string(origin)); filepath.IsAbs(dir) {
			roots = append(roots, dir)
		}
	}
	for _, root := range roots {
		for dir := root; ; dir = filepath.Dir(dir) {
			candidate := filepath.Join(filepath.Dir(dir), "shared", "migration-corpus")
			if info, err := os.Stat(candidate); err == nil && info.IsDir() {
				return candidate
			}
			if filepath.Dir(dir) == dir {
				break
			}
		}
	}
	return ""
}
