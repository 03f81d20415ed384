package file

import (
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/restysync/restysync/agent/internal/source"
)

// A save that breaks a document does not take its objects offline: as the
// API server refuses a bad write and keeps the last good object, the file
// source keeps the last good version of what the broken document defined,
// with a Problem that names the file, the line and the reason.
//
// A broken document is matched to what it defined by the object it names
// (kind, metadata.namespace and metadata.name, read leniently), so the
// other documents of the file take their new versions. A document that is
// not YAML at all names nothing: then every object of the file's last good
// version that no good document of the new version defines is kept (per
// file), since guessing a document by its position would keep the wrong
// object once documents move.

// rawDocument is one document of a file as the splitter found it.
type rawDocument struct {
	// line is the file's line (1-based) data starts on.
	line int
	data []byte
	// err is set when a malformed separator line, on errLine, ended the
	// document; data is then empty.
	err     error
	errLine int
}

// splitter cuts a file into documents at "---" lines, as apimachinery's
// YAMLReader does (a separator may be followed by a comment; anything else
// after it is an error that drops the document it ends), and counts lines
// so that a Problem can name the line of the file it is about.
type splitter struct {
	data []byte
	pos  int // next byte to read
	line int // lines read
}

// next returns the next document, or false at the end of the data.
func (s *splitter) next() (rawDocument, bool) {
	start, startLine := -1, 0
	for s.pos < len(s.data) {
		end := bytes.IndexByte(s.data[s.pos:], '\n')
		if end < 0 {
			end = len(s.data)
		} else {
			end += s.pos + 1
		}
		lineStart := s.pos
		text := s.data[lineStart:end]
		s.pos = end
		s.line++
		if rest, ok := bytes.CutPrefix(text, []byte("---")); ok {
			rest = bytes.TrimSpace(rest)
			if len(rest) > 0 && rest[0] != '#' {
				return rawDocument{line: s.line, errLine: s.line,
					err: fmt.Errorf("invalid Yaml document separator: %s", rest)}, true
			}
			if start >= 0 {
				return rawDocument{line: startLine, data: s.data[start:lineStart]}, true
			}
			continue
		}
		if start < 0 {
			start, startLine = lineStart, s.line
		}
	}
	if start >= 0 {
		return rawDocument{line: startLine, data: s.data[start:]}, true
	}
	return rawDocument{}, false
}

// yamlLine matches the line numbers the YAML parser puts in its errors,
// which count from the start of the document.
var yamlLine = regexp.MustCompile(`\bline (\d+)\b`)

// unknownField matches the field strict decoding names.
var unknownField = regexp.MustCompile(`unknown field "([^"]+)"`)

// locate makes reason name the line of the file it is about: the YAML
// parser's line numbers are moved from the document to the file; a reason
// without one gets "line N: " in front, N the line of the unknown field it
// names if that can be found, else the document's first line.
func locate(raw rawDocument, reason string) string {
	found := false
	reason = yamlLine.ReplaceAllStringFunc(reason, func(m string) string {
		n, err := strconv.Atoi(strings.TrimPrefix(m, "line "))
		if err != nil {
			return m
		}
		found = true
		return "line " + strconv.Itoa(raw.line+n-1)
	})
	if found {
		return reason
	}
	line := raw.line + firstContentLine(raw.data)
	if m := unknownField.FindStringSubmatch(reason); m != nil {
		if n, ok := keyLine(raw.data, lastSegment(m[1])); ok {
			line = raw.line + n
		}
	}
	return "line " + strconv.Itoa(line) + ": " + reason
}

// firstContentLine returns the 0-based line of data that holds its first
// YAML, past blank lines and comments.
func firstContentLine(data []byte) int {
	for i, line := range bytes.Split(data, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) > 0 && line[0] != '#' {
			return i
		}
	}
	return 0
}

// lastSegment returns the last key of a field path ("endpoints[0].adresses" → "adresses").
func lastSegment(path string) string {
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		path = path[i+1:]
	}
	if i := strings.IndexByte(path, '['); i >= 0 {
		path = path[:i]
	}
	return path
}

// keyLine returns the 0-based line of data where key is first written as a
// mapping key ("key:", "- key:", or quoted).
func keyLine(data []byte, key string) (int, bool) {
	if key == "" {
		return 0, false
	}
	for i, line := range bytes.Split(data, []byte("\n")) {
		line = bytes.TrimLeft(bytes.TrimSpace(line), "- ")
		for _, written := range []string{key, `"` + key + `"`, "'" + key + "'"} {
			if rest, ok := bytes.CutPrefix(line, []byte(written)); ok && bytes.HasPrefix(bytes.TrimLeft(rest, " "), []byte(":")) {
				return i, true
			}
		}
	}
	return 0, false
}

// identify returns the object a document that failed to decode names, or
// nil when it names none of the kinds the source reads (or is not YAML).
func identify(data []byte) *objectKey {
	if checkAliases(data) != "" {
		return nil
	}
	var head struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal(data, &head); err != nil || head.Metadata.Name == "" {
		return nil
	}
	key := objectKey{kind: source.Kind(head.Kind), namespace: head.Metadata.Namespace, name: head.Metadata.Name}
	switch key.kind {
	case source.KindIngressClass, source.KindGatewayClass, source.KindNamespace:
		key.namespace = ""
	case source.KindIngress, source.KindService, source.KindEndpointSlice, source.KindSecret, source.KindConfigMap,
		source.KindGateway, source.KindHTTPRoute, source.KindGRPCRoute, source.KindTLSRoute, source.KindReferenceGrant, source.KindListenerSet, source.KindBackendTLSPolicy:
		if key.namespace == "" {
			key.namespace = "default"
		}
	default:
		return nil
	}
	return &key
}

// keepLastGood adds to docs, the good documents of a file's new version,
// the last good version (from served, what the file served until now) of
// what each failed problem defined and no good document defines, and says
// so in that problem's reason. A file never read well keeps nothing.
func keepLastGood(served, docs []document, problems []problem) []document {
	defined := make(map[objectKey]bool, len(docs))
	for _, doc := range docs {
		defined[doc.key()] = true
	}
	for i, p := range problems {
		if !p.failed {
			continue
		}
		var kept []objectKey
		for _, old := range served {
			if defined[old.key()] || (p.defines != nil && old.key() != *p.defines) {
				continue
			}
			defined[old.key()] = true
			kept = append(kept, old.key())
			kept := old
			kept.index = p.index
			docs = append(docs, kept)
		}
		if len(kept) > 0 {
			problems[i].reason = keptReason(p.reason, kept)
		}
	}
	slices.SortStableFunc(docs, func(a, b document) int { return a.index - b.index })
	return docs
}

// maxKeptNames is how many kept objects a reason names before it counts the rest.
const maxKeptNames = 3

func keptReason(reason string, kept []objectKey) string {
	reason = strings.TrimSuffix(strings.TrimSuffix(reason, "; document left out"), "; file left out")
	names := make([]string, 0, maxKeptNames)
	for _, key := range kept[:min(len(kept), maxKeptNames)] {
		names = append(names, key.String())
	}
	list := strings.Join(names, ", ")
	if more := len(kept) - len(names); more > 0 {
		list += fmt.Sprintf(" and %d more", more)
	}
	if len(kept) == 1 {
		return reason + "; the last good version of " + list + " is kept until the file is fixed"
	}
	return reason + "; the last good versions of " + list + " are kept until the file is fixed"
}
