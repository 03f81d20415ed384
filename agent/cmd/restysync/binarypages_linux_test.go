package main

import (
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func TestReadOnlyMappings(t *testing.T) {
	maps := `00400000-01155000 r-xp 00000000 00:2d 123 /opt/rest ysync
01155000-01f6d000 r--p 00d55000 00:2d 123 /opt/rest ysync
01f6d000-02005000 rw-p 01b6d000 00:2d 123 /opt/rest ysync
02005000-02100000 rw-p 00000000 00:00 0
7f9529436000-7f952958c000 r-xp 00026000 00:2d 99 /usr/lib/x86_64-linux-gnu/libc.so.6
7ffc2160b000-7ffc2162c000 rw-p 00000000 00:00 0 [stack]
zz-01 r--p 0 0 0 /opt/rest ysync
`
	got := readOnlyMappings([]byte(maps), "/opt/rest ysync")
	want := []addressRange{{0x400000, 0x1155000}, {0x1155000, 0x1f6d000}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %x, want %x", got, want)
	}
}

// TestReleaseBinaryPages: the test binary's own read-only pages leave its
// resident set (written to disk first: the kernel pages out clean file
// pages only, as an image's binary is).
func TestReleaseBinaryPages(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	before := residentOf(t, exe)
	asked, err := releaseBinaryPages()
	if err != nil {
		t.Fatalf("releaseBinaryPages: %v (asked %d bytes)", err, asked)
	}
	after := residentOf(t, exe)
	t.Logf("read-only pages of the test binary resident: %d KiB before, %d KiB after (%d KiB asked)", before, after, asked>>10)
	if asked == 0 || after >= before/2 {
		t.Errorf("resident %d KiB before, %d KiB after: want at least half paged out", before, after)
	}
}

// residentOf sums the Rss of this process's read-only mappings of path, in KiB.
func residentOf(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	total, counting := 0, false
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		switch {
		case len(fields) >= 5 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":"): // a mapping's first line
			counting = len(fields) >= 6 && strings.Join(fields[5:], " ") == path && !strings.Contains(fields[1], "w")
		case len(fields) == 3 && fields[0] == "Rss:" && counting:
			kib, _ := strconv.Atoi(fields[1])
			total += kib
		}
	}
	return total
}
