package file

import (
	"bytes"
	"fmt"

	yaml "go.yaml.in/yaml/v3"
)

// MaxAliasExpansion bounds, in bytes, how much YAML aliases ("*name") may
// add to one document when they are expanded. The decoder expands every
// alias into a full copy of what its anchor holds, and then into JSON, so
// a small file of aliases to a large anchor (a "billion laughs") would
// take gigabytes. Anchors and aliases themselves are fine: a few shared
// labels or ports add a few hundred bytes. A document over the limit is
// left out with a Problem before it is decoded.
const MaxAliasExpansion = 1 << 20

// aliasNodeCost is what one expanded node counts for besides its text:
// about the JSON punctuation and the Go value the decoder makes of it.
const aliasNodeCost = 16

// checkAliases returns why raw cannot be decoded safely, or "": its
// aliases must not add more than MaxAliasExpansion bytes, and none may
// refer to the node that holds it. A document without '*' has no alias
// and costs nothing more; one with '*' (a wildcard host, say) is parsed
// once more, without expanding anything, to measure them.
func checkAliases(raw []byte) string {
	if !bytes.ContainsRune(raw, '*') {
		return ""
	}
	var root yaml.Node
	if err := yaml.Unmarshal(raw, &root); err != nil {
		// Not expanded, so not a bomb: the decoder reports its own error.
		return ""
	}
	m := aliasMeter{sizes: map[*yaml.Node]int64{}}
	m.size(&root)
	switch {
	case m.cycle != "":
		return fmt.Sprintf("YAML alias *%s refers to the node that holds it; document left out", shorten(m.cycle))
	case m.added > MaxAliasExpansion:
		return fmt.Sprintf("YAML aliases expand the document by more than %d bytes (the limit); document left out", MaxAliasExpansion)
	}
	return ""
}

// aliasMeter measures the expanded size of a node tree, each anchored
// node once.
type aliasMeter struct {
	sizes map[*yaml.Node]int64 // expanded size of anchored nodes; -1 while measuring one
	added int64                // bytes the aliases add
	cycle string               // the anchor of an alias inside its own node
}

// size returns the expanded size of n, and adds what each alias under it
// expands to. It stops counting once the limit is passed.
func (m *aliasMeter) size(n *yaml.Node) int64 {
	if n == nil || m.cycle != "" || m.added > MaxAliasExpansion {
		return 0
	}
	if n.Anchor != "" {
		if s, ok := m.sizes[n]; ok {
			if s < 0 {
				m.cycle = n.Anchor
				return 0
			}
			return s
		}
		m.sizes[n] = -1
	}
	s := int64(aliasNodeCost + len(n.Value) + len(n.Tag))
	if n.Kind == yaml.AliasNode {
		target := m.size(n.Alias)
		m.added += target
		s += target
	}
	for _, child := range n.Content {
		s += m.size(child)
	}
	if n.Anchor != "" {
		m.sizes[n] = s
	}
	return s
}
