// Package textsafe makes stored text safe to show to a person: on a
// terminal, where control characters are commands (ESC starts an escape
// sequence: OSC 0 sets the window's title, OSC 52 writes the clipboard),
// and on a page, where bidirectional overrides reorder what is read and
// zero-width characters make two different names look the same.
package textsafe

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Visible returns s with every character that would act instead of
// being seen written as an escape: `\x1b` for a control character
// (C0, DEL, C1), `\u202e` for a format character (the bidirectional
// embeddings, overrides, isolates and marks, the zero-width space,
// joiners and no-break space, the soft hyphen, tag characters),
// `\u2028` for the line and paragraph separators, and `\xff` for a byte
// that is not UTF-8 (a terminal may read a stray 0x9b as CSI). The
// rest, backslashes included, is left as it is: Visible is for reading,
// and a string without such characters comes back unchanged.
func Visible(s string) string {
	return escape(s, needsEscape)
}

// VisibleLines is Visible for text shown on several lines, such as
// indented JSON: it keeps newlines and tabs as they are.
func VisibleLines(s string) string {
	return escape(s, func(r rune) bool { return r != '\n' && r != '\t' && needsEscape(r) })
}

func escape(s string, needsEscape func(rune) bool) string {
	if !strings.ContainsFunc(s, needsEscape) && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[0])
		case r < 0x80 && needsEscape(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case needsEscape(r) && r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		case needsEscape(r):
			fmt.Fprintf(&b, `\U%08x`, r)
		default:
			b.WriteString(s[:size])
		}
		s = s[size:]
	}
	return b.String()
}

// needsEscape reports a character that acts instead of being seen.
func needsEscape(r rune) bool {
	return unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r) ||
		r == '\u2028' || r == '\u2029'
}
