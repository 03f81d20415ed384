package main

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// releaseBinaryPages asks the kernel to page out the agent's own binary:
// the read-only mappings of its executable (code and read-only data).
// Starting touches a large part of them once (flag parsing, the API
// types' registration, the listing, the first build and render), and
// the kernel maps a file's neighbouring pages on each fault too, so an
// idle agent kept about 20 MB of its 28 MB binary resident; what it
// runs afterwards faults back in from the page cache or the image. It
// returns the bytes it asked about; a kernel without MADV_PAGEOUT
// (before 5.4) refuses and nothing changes.
func releaseBinaryPages() (int, error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, err
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0, err
	}
	asked := 0
	for _, r := range readOnlyMappings(maps, exe) {
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, r.start, r.end-r.start, unix.MADV_PAGEOUT); errno != 0 {
			return asked, errno
		}
		asked += int(r.end - r.start)
	}
	return asked, nil
}

// addressRange is [start, end) of a mapping.
type addressRange struct{ start, end uintptr }

// readOnlyMappings returns the ranges of /proc/PID/maps content maps that
// map the file path without write permission.
func readOnlyMappings(maps []byte, path string) []addressRange {
	var out []addressRange
	lines := bufio.NewScanner(bytes.NewReader(maps))
	for lines.Scan() {
		// "start-end perms offset dev inode path"; the path may hold spaces.
		fields := strings.Fields(lines.Text())
		if len(fields) < 6 || strings.Join(fields[5:], " ") != path || strings.Contains(fields[1], "w") {
			continue
		}
		from, to, ok := strings.Cut(fields[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(from, 16, 64)
		end, err2 := strconv.ParseUint(to, 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			continue
		}
		out = append(out, addressRange{uintptr(start), uintptr(end)})
	}
	return out
}
