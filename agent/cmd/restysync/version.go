package main

import "runtime/debug"

// versionString is "VERSION (commit COMMIT)", the commit taken from the
// build's VCS stamp when -ldflags did not set it.
func versionString() string {
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
	return version + " (commit " + c + ")"
}
