package textsafe

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestVisible(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"plain text is unchanged", `order.placed "ana" \ 42 ñ 東京 🎉`, `order.placed "ana" \ 42 ñ 東京 🎉`},
		{"an escape sequence that sets the window title", "a\x1b]0;pwned\x07b", `a\x1b]0;pwned\x07b`},
		{"a clipboard write", "\x1b]52;c;ZWNobyBoaQ==\x1b\\", `\x1b]52;c;ZWNobyBoaQ==\x1b\`},
		{"a C1 control, as UTF-8", "a\u009b2Jb", `a\u009b2Jb`},
		{"a byte that is not UTF-8", "a\x9b2J", `a\x9b2J`},
		{"DEL, tab and newline", "a\x7fb\tc\n", `a\x7fb\x09c\x0a`},
		{"a right-to-left override", "invoice\u202efdp.exe", `invoice\u202efdp.exe`},
		{"isolates and marks", "\u2066a\u2069\u200f", `\u2066a\u2069\u200f`},
		{"zero-width characters", "bil\u200bling\u200d\u2060\ufeff", `bil\u200bling\u200d\u2060\ufeff`},
		{"a tag character", "a\U000e0041", `a\U000e0041`},
		{"a line separator", "a\u2028b", `a\u2028b`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Visible(tt.in)
			require.Equal(t, tt.want, got, "Visible(%q) = %q, want %q", tt.in, got, tt.want)
		})
	}
}

func TestVisibleLines(t *testing.T) {
	in := "{\n\t\"k\": \"a\u202eb\x1b[2J\"\n}"
	want := "{\n\t\"k\": \"a\\u202eb\\x1b[2J\"\n}"
	got := VisibleLines(in)
	require.Equal(t, want, got, "VisibleLines(%q) = %q, want %q", in, got, want)
}
