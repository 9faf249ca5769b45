package driverutil

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"math/big"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
)

// FuzzCheckTime checks that the clock range is exactly the years 0001 to
// 9999 in UTC, that Infinite and Query.Filter agree with it, and that a
// valid time survives the drivers' microsecond storage.
func FuzzCheckTime(f *testing.F) {
	for _, t := range []time.Time{
		MinTime, MinTime.Add(-time.Nanosecond), EndTime, EndTime.Add(-time.Nanosecond),
		time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), time.Unix(0, 0), {},
		time.Date(300000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-300000, 1, 1, 0, 0, 0, 0, time.UTC),
	} {
		f.Add(t.Unix(), int64(t.Nanosecond()))
	}
	f.Add(int64(math.MaxInt64/2), int64(0))
	f.Add(int64(math.MinInt64/2), int64(999999999))
	f.Fuzz(func(t *testing.T, sec, nsec int64) {
		// Near the ends of int64, time.Unix has no corresponding time
		// (its seconds since the year 1 overflow); ±146 billion years
		// are far enough.
		if sec > math.MaxInt64/2 || sec < math.MinInt64/2 {
			return
		}
		at := time.Unix(sec, nsec).UTC()
		inRange := at.Year() >= 1 && at.Year() <= 9999
		err := CheckTime("clock", at)
		require.Equal(t, inRange, err == nil, "CheckTime(%s) = %v; the year is %d", at, err, at.Year())
		if err != nil {
			require.ErrorIs(t, err, rheo.ErrInvalidArgument, "CheckTime(%s) = %v, not invalid_argument naming the clock", at, err)
			require.Contains(t, err.Error(), "clock", "CheckTime(%s) = %v, not invalid_argument naming the clock", at, err)
		}
		inf := Infinite(at)
		require.Equal(t, !inRange, inf != 0, "Infinite(%s) = %d", at, inf)
		if inf < 0 {
			require.True(t, at.Before(MinTime), "Infinite(%s) = %d", at, inf)
		}
		if inf > 0 {
			require.False(t, at.Before(EndTime), "Infinite(%s) = %d", at, inf)
		}

		filter, err := rheo.Query{From: &at}.Filter()
		require.NoError(t, err)
		var bounds struct{ From string }
		require.NoError(t, json.Unmarshal(filter, &bounds))
		switch Infinite(at) {
		case -1:
			require.Equal(t, "-infinity", bounds.From, "Filter renders %s as %q", at, bounds.From)
		case 1:
			require.Equal(t, "infinity", bounds.From, "Filter renders %s as %q", at, bounds.From)
		default:
			parsed, err := time.Parse(time.RFC3339Nano, bounds.From)
			require.NoError(t, err, "Filter renders %s as %q", at, bounds.From)
			require.True(t, parsed.Equal(at.Truncate(time.Microsecond)), "Filter renders %s as %q (%v)", at, bounds.From, err)
			back := time.UnixMicro(at.UnixMicro())
			require.True(t, back.Equal(at.Truncate(time.Microsecond)), "%s is %s after a round trip through microseconds", at, back)
		}
	})
}

// FuzzCheckSequence checks that start_after and from_sequence accept
// exactly 0 to 2^63-2, so that the cursor after one always fits.
func FuzzCheckSequence(f *testing.F) {
	for _, n := range []int64{0, 1, -1, MaxStartSequence, MaxStartSequence + 1, math.MinInt64, 1 << 40} {
		f.Add(n)
	}
	f.Fuzz(func(t *testing.T, n int64) {
		err := CheckSequence("start_after", n)
		require.Equal(t, n >= 0 && n <= math.MaxInt64-1, err == nil, "CheckSequence(%d) = %v", n, err)
		if err == nil {
			require.Greater(t, n+1, n, "the cursor after %d overflows", n)
		}
		if err != nil {
			require.ErrorIs(t, err, rheo.ErrInvalidArgument, "CheckSequence(%d) = %v, not invalid_argument naming start_after", n, err)
			require.Contains(t, err.Error(), "start_after", "CheckSequence(%d) = %v, not invalid_argument naming start_after", n, err)
		}
	})
}

// FuzzCheckLength checks that texts are limited in bytes, not in
// characters.
func FuzzCheckLength(f *testing.F) {
	for _, s := range []string{"", "k", strings.Repeat("x", MaxTextBytes), strings.Repeat("x", MaxTextBytes+1),
		strings.Repeat("é", MaxTextBytes/2), strings.Repeat("é", MaxTextBytes/2+1), strings.Repeat("😀", 300)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := CheckLength("event id", s)
		require.Equal(t, len([]byte(s)) <= 1024, err == nil, "CheckLength of %d bytes = %v", len(s), err)
		if err != nil {
			require.ErrorIs(t, err, rheo.ErrInvalidArgument, "CheckLength = %v, not invalid_argument naming the id", err)
			require.Contains(t, err.Error(), "event id", "CheckLength = %v, not invalid_argument naming the id", err)
		}
	})
}

// FuzzCheckJSON checks CheckJSON and its parts against independent
// readings of the same document through encoding/json's decoder: the
// nesting depth, NUL characters in strings, and the numbers PostgreSQL's
// numeric can hold; and that half a surrogate pair is found whatever the
// formatting, and never in what encoding/json writes.
func FuzzCheckJSON(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"a": [1, 2, {"b": null}]}`, `{"key": "k1", "n": 1.5e3}`, `[[[[]]]]`, `"x"`, `not json`, ``,
		`{"a": "\u0000"}`, `{"a": "\\u0000"}`, `{"a": "\ud800"}`, `{"a": "\ud83d\ude00"}`, `{"\udc00": 1}`,
		`{"a": "\ud800\u0041"}`, `{"a": "[[[\"{{{"}`, `{"n": 1e131071}`, `{"n": 1e131072}`, `{"n": 1e-16383}`,
		`{"n": 1e-16384}`, `{"n": 0e1073741822}`, `{"n": 0e1073741823}`, `{"n": -0.00e-16382}`, `[1e99999999999999999999]`,
		`{"a": ` + strings.Repeat("[", MaxJSONDepth-1) + strings.Repeat("]", MaxJSONDepth-1) + `}`,
		`{"a": ` + strings.Repeat("[", MaxJSONDepth) + strings.Repeat("]", MaxJSONDepth) + `}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		err := CheckJSON("payload", v)
		if !json.Valid(v) {
			require.Error(t, err, "CheckJSON accepts %q, which is not JSON", v)
			return
		}
		tokens, err := decodeTokens(v)
		require.NoError(t, err, "decode %q", v)
		deeper := jsonDeeperThan(v, MaxJSONDepth)
		require.Equal(t, tokens.depth > MaxJSONDepth, deeper, "jsonDeeperThan(%q) = %v, the decoder finds depth %d", v, deeper, tokens.depth)
		nul := hasNULEscape(v)
		require.Equal(t, tokens.nul, nul, "hasNULEscape(%q) = %v, the decoder finds a NUL: %v", v, nul, tokens.nul)
		for _, n := range tokens.numbers {
			got, want := numericFits(n), referenceNumericFits(n)
			require.Equal(t, want, got, "numericFits(%s) = %v, want %v", n, got, want)
		}
		var indented bytes.Buffer
		require.NoError(t, json.Indent(&indented, v, "", "  "))
		problem, again := jsonbProblem(v), jsonbProblem(indented.Bytes())
		require.Equal(t, again, problem, "jsonbProblem(%q) = %q, indented %q", v, problem, again)
		if !slices.ContainsFunc(tokens.numbers, func(n string) bool { return !referenceNumericFits(n) }) {
			// encoding/json writes valid UTF-8, never a surrogate escape,
			// and json.Number as it was read.
			dec := json.NewDecoder(bytes.NewReader(v))
			dec.UseNumber()
			var decoded any
			require.NoError(t, dec.Decode(&decoded))
			written, err := json.Marshal(decoded)
			if err == nil {
				require.Empty(t, jsonbProblem(written), "jsonbProblem(%q) = %q for what encoding/json wrote", written, jsonbProblem(written))
			}
		}
	})
}

// tokens is what the decoder reads in a document.
type tokens struct {
	depth   int
	nul     bool     // a string (key or value) holds a NUL character
	numbers []string // the numbers as written
}

func decodeTokens(v []byte) (tokens, error) {
	var out tokens
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	depth := 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		switch tok := tok.(type) {
		case json.Delim:
			if tok == '[' || tok == '{' {
				depth++
				out.depth = max(out.depth, depth)
			} else {
				depth--
			}
		case string:
			out.nul = out.nul || strings.ContainsRune(tok, 0)
		case json.Number:
			out.numbers = append(out.numbers, string(tok))
		}
	}
}

var numberParts = regexp.MustCompile(`^-?([0-9]+)(?:\.([0-9]+))?(?:[eE]([-+]?[0-9]+))?$`)

// referenceNumericFits is numericFits written another way, with big
// integers: PostgreSQL's numeric_in refuses an exponent of 2^30-1 or more
// either way, more than 16383 digits after the decimal point, and a
// leading digit more than 131071 places before it.
func referenceNumericFits(n string) bool {
	m := numberParts.FindStringSubmatch(n)
	if m == nil {
		panic("not a JSON number: " + n)
	}
	intDigits, fracDigits := m[1], m[2]
	exponent := new(big.Int)
	if m[3] != "" {
		exponent.SetString(strings.TrimPrefix(m[3], "+"), 10)
	}
	limit := big.NewInt(1<<30 - 1)
	if new(big.Int).Abs(exponent).Cmp(limit) >= 0 {
		return false
	}
	scale := new(big.Int).Sub(big.NewInt(int64(len(fracDigits))), exponent)
	if scale.Cmp(big.NewInt(16383)) > 0 {
		return false
	}
	digits := strings.TrimLeft(intDigits+fracDigits, "0")
	if digits == "" {
		return true
	}
	// The leading digit's place: digits before the point, less one, less
	// the leading zeros, plus the exponent.
	lead := big.NewInt(int64(len(intDigits) - 1 - (len(intDigits+fracDigits) - len(digits))))
	lead.Add(lead, exponent)
	return lead.Cmp(big.NewInt(131072)) < 0
}
