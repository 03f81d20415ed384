package snippet

import "strings"

// The fuzz target's round trip: directives written back as nginx text that
// Tokenize reads as the same directives. Only the tests need it; nginx.conf
// is written by package render, through its one quoting function.

// renderText writes dirs back as nginx text that Tokenize reads as the same
// directives: every word double-quoted, with '"' and '\' escaped and tab,
// CR and LF written as \t, \r, \n; one directive per line, blocks indented.
// It is for tests and messages; nginx.conf never holds a snippet's text.
func renderText(dirs []Directive) string {
	var b strings.Builder
	render(&b, dirs, 0)
	return b.String()
}

func render(b *strings.Builder, dirs []Directive, depth int) {
	for _, d := range dirs {
		b.WriteString(strings.Repeat("    ", depth))
		b.WriteString(quoteWord(d.Name))
		for _, a := range d.Args {
			b.WriteByte(' ')
			b.WriteString(quoteWord(a))
		}
		if d.HasBlock {
			b.WriteString(" {\n")
			render(b, d.Block, depth+1)
			b.WriteString(strings.Repeat("    ", depth))
			b.WriteString("}\n")
			continue
		}
		b.WriteString(";\n")
	}
}

func quoteWord(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case '\t':
			b.WriteString(`\t`)
		case '\r':
			b.WriteString(`\r`)
		case '\n':
			b.WriteString(`\n`)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}
