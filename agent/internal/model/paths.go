package model

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"

	networkingv1 "k8s.io/api/networking/v1"

	"github.com/restysync/restysync/agent/internal/chars"
)

// The annotations of this family that other files name (model/annotationtable.go has their rows).
const (
	keyUseRegex = "use-regex"
)

// maxPathLength bounds an Ingress path, in bytes.
const maxPathLength = 2048

// forbiddenPathChars are characters that have no place in the path of a URL
// (query '?', fragment '#') or that mean something in nginx.conf syntax.
const forbiddenPathChars = "{};\"'\\$#?"

// invalidPathSequences and invalidPathSuffixes are the ones the API server
// rejects in Exact and Prefix paths. nginx normalises the request URI before
// it matches locations, so a path holding one of them could never match.
var (
	invalidPathSequences = []string{"//", "/./", "/../", "%2f", "%2F"}
	invalidPathSuffixes  = []string{"/..", "/."}
)

// pathShape returns why path is not path-shaped, or "": it must start
// with "/", be of bounded length and hold only what package chars accepts.
// Both path checks start with it.
func pathShape(path string) string {
	if !strings.HasPrefix(path, "/") {
		return `must start with "/"`
	}
	return valueShape(path, maxPathLength)
}

// valueShape returns why v, a value bound for Lua or nginx, is longer
// than max bytes or holds what package chars refuses, or "".
func valueShape(v string, max int) string {
	if len(v) > max {
		return fmt.Sprintf("is %d bytes long, longer than %d", len(v), max)
	}
	if err := chars.Check(v); err != nil {
		return err.Error()
	}
	return ""
}

// validPath returns why path cannot be an nginx location, or "" when it
// can. It is the only gate between user-written paths and nginx.conf.
func validPath(path string) string {
	if reason := pathShape(path); reason != "" {
		return reason
	}
	for _, r := range path {
		switch {
		case unicode.IsSpace(r):
			return fmt.Sprintf("contains white space %U", r)
		case strings.ContainsRune(forbiddenPathChars, r):
			return fmt.Sprintf("contains %q", r)
		}
	}
	for _, seq := range invalidPathSequences {
		if strings.Contains(path, seq) {
			return fmt.Sprintf("contains %q", seq)
		}
	}
	for _, suffix := range invalidPathSuffixes {
		if strings.HasSuffix(path, suffix) {
			return fmt.Sprintf("ends with %q", suffix)
		}
	}
	return ""
}

// matchType maps an Ingress path type to the match type of a Location.
// ImplementationSpecific means Prefix here, and so does a missing path type,
// which the API server rejects but a hand-written manifest may have.
func matchType(pathType *networkingv1.PathType) (networkingv1.PathType, PathType, string) {
	if pathType == nil {
		return networkingv1.PathTypeImplementationSpecific, PathPrefix, ""
	}
	switch *pathType {
	case networkingv1.PathTypeExact:
		return *pathType, PathExact, ""
	case networkingv1.PathTypePrefix, networkingv1.PathTypeImplementationSpecific:
		return *pathType, PathPrefix, ""
	}
	return "", "", "is not one of Exact, Prefix, ImplementationSpecific"
}

// locationPath checks an Ingress path and returns the Location path for it.
// An ImplementationSpecific path may be empty, which means "/" (as the API
// server and ingress-nginx have it); Prefix paths lose their trailing "/".
func locationPath(path string, pathType networkingv1.PathType, match PathType) (string, string) {
	if path == "" && pathType == networkingv1.PathTypeImplementationSpecific {
		path = "/"
	}
	if match == PathRegex {
		if reason := validRegexPath(path); reason != "" {
			return path, reason
		}
		return path, ""
	}
	if reason := validPath(path); reason != "" {
		return "", reason
	}
	if pathType == networkingv1.PathTypeExact {
		return path, ""
	}
	return trimPrefixPath(path), ""
}

// trimPrefixPath drops the trailing "/" of a Prefix path: prefixes match
// element-wise, so "/foo/" and "/foo" are the same prefix.
func trimPrefixPath(path string) string {
	trimmed := strings.TrimRight(path, "/")
	if trimmed == "" {
		return "/"
	}
	return trimmed
}

// validRegexPath returns why path cannot be a use-regex location, or "".
// It must look like a path (start with "/"), be printable UTF-8 of bounded length,
// and compile as a regular expression. RE2 and nginx's PCRE differ at the
// edges; a regex PCRE refuses is caught by nginx's own check at reload, and
// the syncer then quarantines the Ingress.
func validRegexPath(path string) string {
	if reason := pathShape(path); reason != "" {
		return reason
	}
	for _, r := range path {
		if unicode.IsSpace(r) {
			return fmt.Sprintf("contains %U", r)
		}
	}
	if _, err := regexp.Compile(path); err != nil {
		return fmt.Sprintf("is not a valid regular expression: %v", err)
	}
	return pcreIncompatible(path)
}

// useRegex says whether the ImplementationSpecific paths of ing are
// regular expressions (annotation use-regex, or a rewrite-target, as
// ingress-nginx has it).
func (b *builder) useRegex(ing *networkingv1.Ingress) bool {
	return b.boolAnnotation(ing, keyUseRegex, false) || rewriteImpliesRegex(ing)
}
