// Package snippet is part of the model (build) stage of the pipeline
// (source → model → render → plan → apply): package model uses it to read the snippet
// annotations (configuration-snippet, server-snippet, auth-snippet) and the
// ConfigMap's http-snippet, server-snippet and location-snippet.
//
// A snippet is never copied into nginx.conf. Tokenize reads it as nginx's
// own config parser does (ngx_conf_read_token): words, single- and
// double-quoted strings with nginx's backslash escapes, ";", "{" "}"
// blocks and "#" comments, with "$var" and "${var}" left inside the
// argument text. Check then holds each directive against an allowlist and
// returns what the accepted ones mean as typed values (a header name and
// value, a timeout in seconds, a location with a fixed answer), which the
// model maps onto its own fields and render writes through its one quoting
// function. One directive off the allowlist refuses the whole snippet,
// naming the directive and why.
//
// It is a tokenizer rather than regular expressions over the text because
// the dangerous parts of a snippet hide exactly where regexes go wrong:
// a "}" or ";" inside quotes, an escaped quote, a comment that swallows
// the rest of a line, a CR/LF escape inside a header value. Reading the
// text with nginx's grammar sees the directives nginx would see, and
// nothing else decides what a snippet means.
package snippet

import (
	"fmt"
	"strings"
)

// Limits of one snippet. A snippet past them is refused whole.
const (
	// MaxBytes bounds the text of one snippet.
	MaxBytes = 64 << 10
	// MaxDepth bounds the nesting of blocks ("location { ... }" is 1).
	MaxDepth = 8
	// MaxDirectives bounds the directives of one snippet, blocks included.
	MaxDirectives = 1024
	// MaxArgs bounds the arguments of one directive.
	MaxArgs = 64
)

// Directive is one nginx directive: its name, its arguments as nginx reads
// them (quotes removed, escapes applied, variables left as written), and
// its block when it has one ("location /p { ... }").
type Directive struct {
	Name string
	Args []string
	// Block holds the directives between "{" and "}"; HasBlock says the
	// directive ended with a block rather than with ";" (an empty block
	// has HasBlock and no Block).
	Block    []Directive
	HasBlock bool
	// Line is the 1-based line of the snippet the directive starts on.
	Line int
}

// SyntaxError is a snippet that nginx's parser would not read.
type SyntaxError struct {
	Line int
	Msg  string
	// Block and BlockLine name the directive whose block was being read
	// ("" at the top level): a block of Lua code, say, which nginx's Lua
	// module reads with a grammar of its own.
	Block     string
	BlockLine int
}

func (e *SyntaxError) Error() string {
	if e.Line == 0 {
		return e.Msg
	}
	return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
}

// Tokenize reads text as a list of nginx directives, with nginx's grammar.
// It never panics; text that nginx would not read, or that passes the
// limits above, is a *SyntaxError naming the line.
func Tokenize(text string) ([]Directive, error) {
	if len(text) > MaxBytes {
		return nil, &SyntaxError{Msg: fmt.Sprintf("is %d bytes long; at most %d are allowed", len(text), MaxBytes)}
	}
	t := &tokenizer{src: text, line: 1}
	dirs, err := t.block(0)
	if err != nil {
		if syntax, ok := err.(*SyntaxError); ok && len(t.open) > 0 {
			syntax.Block, syntax.BlockLine = t.open[len(t.open)-1].Name, t.open[len(t.open)-1].Line
		}
		return nil, err
	}
	return dirs, nil
}

// tokenizer reads src from pos; line is pos's line.
type tokenizer struct {
	src   string
	pos   int
	line  int
	count int // directives so far
	// open are the directives whose blocks are being read, innermost last.
	open []Directive
}

// token kinds besides words.
const (
	tokWord = iota
	tokSemicolon
	tokOpen
	tokClose
	tokEOF
)

type token struct {
	kind int
	text string
	line int
}

// block reads directives until the "}" that closes the block at depth
// (depth 0: until the end of the text).
func (t *tokenizer) block(depth int) ([]Directive, error) {
	var dirs []Directive
	for {
		var words []string
		startLine := 0
		for {
			tok, err := t.next()
			if err != nil {
				return nil, err
			}
			switch tok.kind {
			case tokWord:
				if len(words) == 0 {
					startLine = tok.line
				}
				if len(words) > MaxArgs {
					return nil, &SyntaxError{Line: startLine, Msg: fmt.Sprintf("%q has more than %d arguments", clip(words[0]), MaxArgs)}
				}
				words = append(words, tok.text)
				continue
			case tokEOF:
				if len(words) > 0 {
					return nil, &SyntaxError{Line: startLine, Msg: fmt.Sprintf(`%q does not end with ";" or a block`, clip(words[0]))}
				}
				if depth > 0 {
					return nil, &SyntaxError{Line: tok.line, Msg: `unexpected end of the snippet: a block has no "}"`}
				}
				return dirs, nil
			case tokClose:
				if len(words) > 0 {
					return nil, &SyntaxError{Line: tok.line, Msg: fmt.Sprintf(`unexpected "}" after %q: a directive ends with ";"`, clip(words[0]))}
				}
				if depth == 0 {
					return nil, &SyntaxError{Line: tok.line, Msg: `unexpected "}": no block is open`}
				}
				return dirs, nil
			case tokSemicolon, tokOpen:
				if len(words) == 0 {
					what := ";"
					if tok.kind == tokOpen {
						what = "{"
					}
					return nil, &SyntaxError{Line: tok.line, Msg: fmt.Sprintf("unexpected %q: no directive before it", what)}
				}
			}
			// A directive ends here.
			t.count++
			if t.count > MaxDirectives {
				return nil, &SyntaxError{Line: startLine, Msg: fmt.Sprintf("has more than %d directives", MaxDirectives)}
			}
			d := Directive{Name: words[0], Line: startLine}
			if len(words) > 1 {
				d.Args = words[1:]
			}
			if tok.kind == tokOpen {
				if depth+1 > MaxDepth {
					return nil, &SyntaxError{Line: startLine, Msg: fmt.Sprintf("blocks are nested more than %d deep", MaxDepth)}
				}
				t.open = append(t.open, d)
				block, err := t.block(depth + 1)
				if err != nil {
					return nil, err
				}
				t.open = t.open[:len(t.open)-1]
				d.Block, d.HasBlock = block, true
			}
			dirs = append(dirs, d)
			break
		}
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// next returns the next token, as ngx_conf_read_token splits them.
func (t *tokenizer) next() (token, error) {
	// Skip white space and comments.
	for t.pos < len(t.src) {
		c := t.src[t.pos]
		if isSpace(c) {
			if c == '\n' {
				t.line++
			}
			t.pos++
			continue
		}
		if c == '#' {
			for t.pos < len(t.src) && t.src[t.pos] != '\n' {
				t.pos++
			}
			continue
		}
		break
	}
	if t.pos >= len(t.src) {
		return token{kind: tokEOF, line: t.line}, nil
	}
	line := t.line
	switch t.src[t.pos] {
	case ';':
		t.pos++
		return token{kind: tokSemicolon, line: line}, nil
	case '{':
		t.pos++
		return token{kind: tokOpen, line: line}, nil
	case '}':
		t.pos++
		return token{kind: tokClose, line: line}, nil
	case '"', '\'':
		return t.quoted(line)
	}
	return t.word(line)
}

// quoted reads a string in the quote at pos, up to the same quote not
// escaped by a backslash. After it must come white space, ";" or "{", as
// nginx requires.
func (t *tokenizer) quoted(line int) (token, error) {
	quote := t.src[t.pos]
	t.pos++
	start := t.pos
	for {
		if t.pos >= len(t.src) {
			return token{}, &SyntaxError{Line: line, Msg: fmt.Sprintf("a string opened with %c is never closed", quote)}
		}
		c := t.src[t.pos]
		switch {
		case c == '\\' && t.pos+1 < len(t.src):
			if t.src[t.pos+1] == '\n' {
				t.line++
			}
			t.pos += 2
			continue
		case c == '\n':
			t.line++
		case c == quote:
			text := unescape(t.src[start:t.pos])
			t.pos++
			if t.pos < len(t.src) {
				if next := t.src[t.pos]; !isSpace(next) && next != ';' && next != '{' {
					return token{}, &SyntaxError{Line: t.line, Msg: fmt.Sprintf("unexpected %q right after a quoted string", next)}
				}
			}
			return token{kind: tokWord, text: text, line: line}, nil
		}
		t.pos++
	}
}

// word reads an unquoted word: up to white space, ";" or "{". A "}" and
// quotes are part of a word (nginx reads "${var}" so); a backslash keeps
// the next character in the word.
func (t *tokenizer) word(line int) (token, error) {
	start := t.pos
	variable := false
	for t.pos < len(t.src) {
		c := t.src[t.pos]
		if c == '{' && variable {
			variable = false
			t.pos++
			continue
		}
		variable = false
		switch {
		case c == '\\' && t.pos+1 < len(t.src):
			if t.src[t.pos+1] == '\n' {
				t.line++
			}
			t.pos += 2
			continue
		case c == '$':
			variable = true
		case isSpace(c) || c == ';' || c == '{':
			return token{kind: tokWord, text: unescape(t.src[start:t.pos]), line: line}, nil
		}
		t.pos++
	}
	return token{kind: tokWord, text: unescape(t.src[start:t.pos]), line: line}, nil
}

// unescape applies nginx's escapes to the text of a token: \" \' \\ are
// the character, \t \r \n a tab, CR and LF; any other backslash stays.
func unescape(s string) string {
	if strings.IndexByte(s, '\\') < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\\' && i+1 < len(s) {
			switch s[i+1] {
			case '"', '\'', '\\':
				b.WriteByte(s[i+1])
				i++
				continue
			case 't':
				b.WriteByte('\t')
				i++
				continue
			case 'r':
				b.WriteByte('\r')
				i++
				continue
			case 'n':
				b.WriteByte('\n')
				i++
				continue
			}
		}
		b.WriteByte(c)
	}
	return b.String()
}

// clip shortens text quoted in a message.
func clip(s string) string {
	const max = 48
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}
