package main

import (
	"io/fs"
	"testing"
)

// TestCgroupMemoryLimit reads cgroup v2's and v1's limit files, and
// takes "max" and v1's "no limit" for none.
func TestCgroupMemoryLimit(t *testing.T) {
	files := []string{"v2", "v1"}
	for _, c := range []struct {
		name     string
		contents map[string]string
		want     int64
		ok       bool
	}{
		{"v2 limit", map[string]string{"v2": "268435456\n"}, 268435456, true},
		{"v2 none", map[string]string{"v2": "max\n", "v1": "1000"}, 0, false},
		{"v1 limit", map[string]string{"v1": "536870912\n"}, 536870912, true},
		{"v1 none", map[string]string{"v1": "9223372036854771712\n"}, 0, false},
		{"no cgroup files", map[string]string{}, 0, false},
		{"garbage", map[string]string{"v2": "lots"}, 0, false},
	} {
		read := func(name string) ([]byte, error) {
			if s, ok := c.contents[name]; ok {
				return []byte(s), nil
			}
			return nil, fs.ErrNotExist
		}
		got, ok := cgroupMemoryLimit(read, files)
		if got != c.want || ok != c.ok {
			t.Errorf("%s: %d, %v; want %d, %v", c.name, got, ok, c.want, c.ok)
		}
	}
}
