package main

import "runtime/debug"

// versionString is "VERSION (commit COMMIT)".
func versionString() string {
	return version + " (commit " + commitString() + ")"
}

// commitString is the commit set by -ldflags, else the build's VCS stamp,
// else "unknown".
func commitString() string {
	c := commit
	if c == "" {
		if info, ok := debug.ReadBuildInfo(); ok {
			for _, s := range info.Settings {
				if s.Key == "vcs.revision" {
					c = s.Value
				}
			}
		}
	}
	if c == "" {
		c = "unknown"
	}
	return c
}
