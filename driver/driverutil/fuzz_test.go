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
		if inRange != (err == nil) {
			t.Fatalf("CheckTime(%s) = %v; the year is %d", at, err, at.Year())
		}
		if err != nil && (!errors.Is(err, rheo.ErrInvalidArgument) || !strings.Contains(err.Error(), "clock")) {
			t.Fatalf("CheckTime(%s) = %v, not invalid_argument naming the clock", at, err)
		}
		switch inf := Infinite(at); {
		case inRange && inf != 0, !inRange && inf == 0,
			inf < 0 && !at.Before(MinTime), inf > 0 && at.Before(EndTime):
			t.Fatalf("Infinite(%s) = %d", at, inf)
		}

		filter, err := rheo.Query{From: &at}.Filter()
		if err != nil {
			t.Fatal(err)
		}
		var bounds struct{ From string }
		if err := json.Unmarshal(filter, &bounds); err != nil {
			t.Fatal(err)
		}
		switch Infinite(at) {
		case -1:
			if bounds.From != "-infinity" {
				t.Fatalf("Filter renders %s as %q", at, bounds.From)
			}
		case 1:
			if bounds.From != "infinity" {
				t.Fatalf("Filter renders %s as %q", at, bounds.From)
			}
		default:
			parsed, err := time.Parse(time.RFC3339Nano, bounds.From)
			if err != nil || !parsed.Equal(at.Truncate(time.Microsecond)) {
				t.Fatalf("Filter renders %s as %q (%v)", at, bounds.From, err)
			}
			if back := time.UnixMicro(at.UnixMicro()); !back.Equal(at.Truncate(time.Microsecond)) {
				t.Fatalf("%s is %s after a round trip through microseconds", at, back)
			}
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
		if (n >= 0 && n <= math.MaxInt64-1) != (err == nil) {
			t.Fatalf("CheckSequence(%d) = %v", n, err)
		}
		if err == nil && n+1 <= n {
			t.Fatalf("the cursor after %d overflows", n)
		}
		if err != nil && (!errors.Is(err, rheo.ErrInvalidArgument) || !strings.Contains(err.Error(), "start_after")) {
			t.Fatalf("CheckSequence(%d) = %v, not invalid_argument naming start_after", n, err)
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
		if (len([]byte(s)) <= 1024) != (err == nil) {
			t.Fatalf("CheckLength of %d bytes = %v", len(s), err)
		}
		if err != nil && (!errors.Is(err, rheo.ErrInvalidArgument) || !strings.Contains(err.Error(), "event id")) {
			t.Fatalf("CheckLength = %v, not invalid_argument naming the id", err)
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
			if err == nil {
				t.Fatalf("CheckJSON accepts %q, which is not JSON", v)
			}
			return
		}
		tokens, err := decodeTokens(v)
		if err != nil {
			t.Fatalf("decode %q: %v", v, err)
		}
		if got, want := jsonDeeperThan(v, MaxJSONDepth), tokens.depth > MaxJSONDepth; got != want {
			t.Fatalf("jsonDeeperThan(%q) = %v, the decoder finds depth %d", v, got, tokens.depth)
		}
		if got := hasNULEscape(v); got != tokens.nul {
			t.Fatalf("hasNULEscape(%q) = %v, the decoder finds a NUL: %v", v, got, tokens.nul)
		}
		for _, n := range tokens.numbers {
			if got, want := numericFits(n), referenceNumericFits(n); got != want {
				t.Fatalf("numericFits(%s) = %v, want %v", n, got, want)
			}
		}
		var indented bytes.Buffer
		if err := json.Indent(&indented, v, "", "  "); err != nil {
			t.Fatal(err)
		}
		if got, again := jsonbProblem(v), jsonbProblem(indented.Bytes()); got != again {
			t.Fatalf("jsonbProblem(%q) = %q, indented %q", v, got, again)
		}
		if !slices.ContainsFunc(tokens.numbers, func(n string) bool { return !referenceNumericFits(n) }) {
			// encoding/json writes valid UTF-8, never a surrogate escape,
			// and json.Number as it was read.
			dec := json.NewDecoder(bytes.NewReader(v))
			dec.UseNumber()
			var decoded any
			if err := dec.Decode(&decoded); err != nil {
				t.Fatal(err)
			}
			written, err := json.Marshal(decoded)
			if err == nil && jsonbProblem(written) != "" {
				t.Fatalf("jsonbProblem(%q) = %q for what encoding/json wrote", written, jsonbProblem(written))
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
