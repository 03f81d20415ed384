//go:build !linux

package main

// releaseBinaryPages does nothing outside Linux.
func releaseBinaryPages() (int, error) { return 0, nil }
