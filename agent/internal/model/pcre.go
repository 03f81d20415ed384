package model

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// pcreIncompatible returns why nginx's PCRE, which matches bytes (no UTF
// mode), refuses a regex that RE2 compiled, or "". Found by the random
// snapshots test against the real nginx -t:
//   - \x{...} above \x{ff} ("code point value ... is too large");
//   - a class range from or to a set: [\d-z], [[:alpha:]-z] ("invalid range");
//   - POSIX collating elements [[=a=]] and [[.a.]] (RE2 reads them as
//     literal characters);
//   - named groups: PCRE refuses two of one name, and nginx makes each a
//     variable ($name), which could overwrite one the config relies on.
//
// It scans the source, which RE2 has already parsed, so escapes and
// classes are well formed.
func pcreIncompatible(re string) string {
	if compiled, err := regexp.Compile(re); err == nil {
		for _, name := range compiled.SubexpNames() {
			if name != "" {
				return fmt.Sprintf("holds the named group %q: nginx would make it the variable $%s; use an unnamed group", name, name)
			}
		}
	}
	inClass, classStart, prevSet := false, false, false
	for i := 0; i < len(re); i++ {
		c := re[i]
		if c == '\\' && i+1 < len(re) {
			isSet := false
			switch e := re[i+1]; e {
			case 'x':
				if i+2 < len(re) && re[i+2] == '{' {
					end := strings.IndexByte(re[i+3:], '}')
					if end < 0 {
						return ""
					}
					if v, err := strconv.ParseUint(re[i+3:i+3+end], 16, 32); err != nil || v > 0xff {
						return fmt.Sprintf(`holds \x{%s}: nginx matches bytes, so a code point above \x{ff} is refused; write the character itself`, re[i+3:i+3+end])
					}
					i += 3 + end
				} else {
					i += 3
				}
			case 'Q':
				end := strings.Index(re[i+2:], `\E`)
				if end < 0 {
					return ""
				}
				i += 2 + end + 1
			case 'p', 'P':
				isSet = true
				if i+2 < len(re) && re[i+2] == '{' {
					if end := strings.IndexByte(re[i+2:], '}'); end >= 0 {
						i += 2 + end
						break
					}
				}
				i += 2
			case 'd', 'D', 'w', 'W', 's', 'S':
				isSet = true
				i++
			default:
				i++
			}
			if inClass {
				classStart, prevSet = false, isSet
			}
			continue
		}
		switch {
		case !inClass && c == '[':
			inClass, classStart, prevSet = true, true, false
			if i+1 < len(re) && re[i+1] == '^' {
				i++
			}
		case !inClass:
		case c == '[' && i+1 < len(re) && (re[i+1] == '=' || re[i+1] == '.'):
			return "holds a POSIX collating element such as [[=a=]], which nginx refuses"
		case c == '[' && i+1 < len(re) && re[i+1] == ':':
			if end := strings.Index(re[i+2:], ":]"); end >= 0 {
				i += 2 + end + 1
				classStart, prevSet = false, true
				continue
			}
			classStart, prevSet = false, false
		case c == ']' && !classStart:
			inClass = false
		case c == '-' && prevSet && i+1 < len(re) && re[i+1] != ']':
			return `holds a class range from a set such as [\d-z], which nginx refuses; put "-" last in the class`
		default:
			classStart, prevSet = false, false
		}
	}
	return ""
}
