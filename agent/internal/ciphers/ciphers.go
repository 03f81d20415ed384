// Package ciphers checks an OpenSSL cipher list (ConfigMap ssl-ciphers,
// annotation proxy-ssl-ciphers) as nginx's ssl_ciphers hands it to
// SSL_CTX_set_cipher_list, so that a list OpenSSL refuses is a Problem in
// the model stage of the pipeline (source → model → render → plan → apply), never an
// nginx that does not start. The agent is pure Go, so the grammar is
// written here, and its table of cipher names and aliases (table.go) is
// read from the real OpenSSL by TestTableIsOpenSSLs -update.
//
// The grammar is OpenSSL's: elements separated by ':', ',' or ' '; an
// element is a cipher name or aliases joined by '+' (the ciphers in all
// of them), prefixed by nothing (add), '-' (remove), '!' (remove for
// good) or '+' (move to the end); "@STRENGTH" and "@SECLEVEL=n" (n 0 to 5)
// are commands; "DEFAULT" may open the list. A list that selects no
// cipher of TLS 1.2 or older fails, as SSL_CTX_set_cipher_list does.
//
// The checker is stricter than OpenSSL where OpenSSL is silent: OpenSSL
// skips a word it does not know, so "NOTACIPHER:HIGH" works and a typo
// goes unseen; here every word must be a cipher name or an alias of the
// table, and a cipher name is not joined with '+' (OpenSSL then reads the
// element in a way its manual does not describe). So every list Check
// accepts, OpenSSL accepts.
package ciphers

import (
	"fmt"
	"strings"
)

// MaxLength bounds a cipher list.
const MaxLength = 2048

// Check returns nil when OpenSSL takes list as a cipher list that selects
// at least one cipher, or why not, naming the word it does not take.
func Check(list string) error {
	if len(list) > MaxLength {
		return fmt.Errorf("is %d bytes long, longer than %d", len(list), MaxLength)
	}
	var active, killed set
	elements := strings.FieldsFunc(list, func(r rune) bool { return r == ':' || r == ',' || r == ' ' })
	for i, element := range elements {
		if i == 0 && element == "DEFAULT" {
			// OpenSSL's default list: ALL:!COMPLEMENTOFDEFAULT:!eNULL.
			active = aliases["ALL"]
			killed = aliases["COMPLEMENTOFDEFAULT"].or(aliases["eNULL"])
			active = active.andNot(killed)
			continue
		}
		op, words := element[0], element[1:]
		switch op {
		case '-', '!', '+', '@':
		default:
			op, words = 0, element
		}
		if op == '@' {
			if words != "STRENGTH" && !(len(words) == len("SECLEVEL=n") && strings.HasPrefix(words, "SECLEVEL=") && words[9] >= '0' && words[9] <= '5') {
				return fmt.Errorf("has %q, but the commands are @STRENGTH and @SECLEVEL=0 to 5", element)
			}
			continue
		}
		matched, err := match(element, words)
		if err != nil {
			return err
		}
		switch op {
		case 0:
			active = active.or(matched.andNot(killed))
		case '-':
			active = active.andNot(matched)
		case '!':
			active = active.andNot(matched)
			killed = killed.or(matched)
		}
	}
	if active.empty() {
		return fmt.Errorf("selects no cipher of TLS 1.2 or older (OpenSSL would refuse it: no cipher match)")
	}
	return nil
}

// match returns the ciphers of words: a cipher name, or aliases joined
// by '+'.
func match(element, words string) (set, error) {
	if words == "" {
		return set{}, fmt.Errorf("has %q, which names no cipher", element)
	}
	for i := 0; i < len(words); i++ {
		c := words[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '=' || c == '+') {
			return set{}, fmt.Errorf("has %q in %q; OpenSSL reads names of letters, digits, '-', '.' and '='", c, element)
		}
	}
	if i, ok := cipherIndex[words]; ok {
		var s set
		s.add(i)
		return s, nil
	}
	var s set
	for j, word := range strings.Split(words, "+") {
		alias, ok := aliases[word]
		switch {
		case word == "":
			return set{}, fmt.Errorf("has %q, with an empty name", element)
		case isCipher(word):
			return set{}, fmt.Errorf("has %q: a cipher name joined with '+'; name the cipher alone", element)
		case !ok:
			return set{}, fmt.Errorf("names %q, which is not an OpenSSL cipher or alias", word)
		}
		if j == 0 {
			s = alias
		} else {
			s = s.and(alias)
		}
	}
	return s, nil
}

func isCipher(name string) bool {
	_, ok := cipherIndex[name]
	return ok
}

// set is a set of the ciphers of the table, by index.
type set [setWords]uint64

func (s *set) add(i int)       { s[i/64] |= 1 << (i % 64) }
func (s set) has(i int) bool   { return s[i/64]&(1<<(i%64)) != 0 }
func (s set) or(t set) set     { return s.each(t, func(a, b uint64) uint64 { return a | b }) }
func (s set) and(t set) set    { return s.each(t, func(a, b uint64) uint64 { return a & b }) }
func (s set) andNot(t set) set { return s.each(t, func(a, b uint64) uint64 { return a &^ b }) }
func (s set) empty() bool      { return s == set{} }
func (s set) each(t set, f func(a, b uint64) uint64) set {
	for i := range s {
		s[i] = f(s[i], t[i])
	}
	return s
}

// cipherIndex is the index of each name of Ciphers.
var cipherIndex = func() map[string]int {
	m := make(map[string]int, len(Ciphers))
	for i, name := range Ciphers {
		m[name] = i
	}
	return m
}()
