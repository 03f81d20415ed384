package model

import "strings"

// ingressNginxPrefix is the prefix ingress-nginx reads its annotations under.
const ingressNginxPrefix = "nginx.ingress.kubernetes.io/"

// ingressNginxIgnores reports whether ingress-nginx ignores the annotation
// key (full key), and why.
func ingressNginxIgnores(key string) (reason string, ignored bool) {
	name, ok := strings.CutPrefix(key, ingressNginxPrefix)
	if !ok || ingressNginxReads(name) {
		return "", false
	}
	if row, ok := annotationRows[name]; ok && row.Status == AnnotationIgnoredByIngressNginx {
		return row.Why, true
	}
	if near := nearestIngressNginxAnnotation(name); near != "" {
		return "not an ingress-nginx annotation; a typo of " + near + "?", true
	}
	return "not an ingress-nginx annotation", true
}

// nearestIngressNginxAnnotation returns the one annotation name ingress-nginx
// reads within two edits of name, or "".
func nearestIngressNginxAnnotation(name string) string {
	var known []string
	for _, row := range Annotations {
		if ingressNginxReads(row.Name) {
			known = append(known, row.Name)
		}
	}
	return TypoOf(name, known)
}

// TypoOf returns the one name of known within two edits of name, or ""
// when there is none or more than one (no guess then), or name is itself
// known. It is the guess behind the typo status of an annotation and of a
// ConfigMap key (package configmap).
func TypoOf(name string, known []string) string {
	found := ""
	for _, k := range known {
		if k == name {
			return ""
		}
		if k != found && editDistance(name, k) <= 2 {
			if found != "" {
				return "" // more than one: no guess
			}
			found = k
		}
	}
	return found
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
