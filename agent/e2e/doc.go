// Package e2e holds the end-to-end tests: the real agent binary, a real nginx
// with the Lua module, and real HTTP backends on loopback, checked over HTTP.
// It has no code of its own; the tests build the binaries they run.
package e2e
