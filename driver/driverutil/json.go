package driverutil

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"

	"github.com/rheo-go/rheo"
)

// CheckJSON reports as invalid_argument, naming the argument what, bytes
// that are not JSON and JSON that either database cannot take: nested
// deeper than MaxJSONDepth (SQLite's JSON functions stop at 1000 levels,
// and the SQLite driver's batch rows add two), or holding what
// PostgreSQL's jsonb refuses (the escape \u0000, half a surrogate pair,
// a number beyond its numeric type). PostgreSQL would refuse the latter
// too, but not saying which argument it was. Whether the value is an
// object is for the operation to say, after its other checks.
func CheckJSON(what string, v []byte) error {
	if !json.Valid(v) {
		return rheo.Errorf(rheo.ErrInvalidArgument, "%s is not valid JSON", what)
	}
	if jsonDeeperThan(v, MaxJSONDepth) {
		return rheo.Errorf(rheo.ErrInvalidArgument, "%s nests objects and arrays more than %d levels deep", what, MaxJSONDepth)
	}
	if hasNULEscape(v) {
		return rheo.Errorf(rheo.ErrInvalidArgument, "%s contains \\u0000, which cannot be stored", what)
	}
	if problem := jsonbProblem(v); problem != "" {
		return rheo.Errorf(rheo.ErrInvalidArgument, "%s %s, which PostgreSQL's jsonb refuses", what, problem)
	}
	return nil
}

// jsonDeeperThan reports whether valid JSON v nests objects and arrays
// more than limit levels deep. Brackets and braces count only outside
// strings; inside them a backslash escapes the next byte.
func jsonDeeperThan(v []byte, limit int) bool {
	depth := 0
	inString := false
	for i := 0; i < len(v); i++ {
		c := v[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '[', '{':
			depth++
			if depth > limit {
				return true
			}
		case ']', '}':
			depth--
		}
	}
	return false
}

// hasNULEscape reports whether valid JSON v contains the escape \u0000,
// which PostgreSQL's jsonb cannot store. Backslashes occur only inside
// strings, each starting a two-character or \uXXXX escape.
func hasNULEscape(v []byte) bool {
	for i := 0; i < len(v); i++ {
		if v[i] != '\\' {
			continue
		}
		if i+5 < len(v) && string(v[i+1:i+6]) == "u0000" {
			return true
		}
		i++ // skip the escaped character
	}
	return false
}

// jsonbProblem says what in valid JSON v PostgreSQL's jsonb input
// refuses, besides \u0000: a surrogate escape that is not part of a
// pair (\ud800 alone), or a number outside the range of its numeric
// type. It returns "" when there is nothing.
func jsonbProblem(v []byte) string {
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '"':
			end, ok := surrogatesPaired(v, i+1)
			if !ok {
				return "has a \\u escape of half a surrogate pair"
			}
			i = end
		case c == '-' || c >= '0' && c <= '9':
			end := i + 1
			for end < len(v) && strings.IndexByte("+-.0123456789eE", v[end]) >= 0 {
				end++
			}
			if !numericFits(string(v[i:end])) {
				return "has a number outside PostgreSQL's numeric range"
			}
			i = end - 1
		}
	}
	return ""
}

// surrogatesPaired scans the JSON string whose contents start at v[i] and
// returns the index of its closing quote, and whether every \u escape of
// a surrogate half is a high one directly followed by a low one, as
// PostgreSQL requires. v is valid JSON.
func surrogatesPaired(v []byte, i int) (int, bool) {
	high := false // a high surrogate escape waits for its low one
	for ; i < len(v); i++ {
		switch v[i] {
		case '"':
			return i, !high
		case '\\':
			if v[i+1] != 'u' {
				if high {
					return i, false
				}
				i++ // the escaped character
				continue
			}
			r, _ := strconv.ParseUint(string(v[i+2:i+6]), 16, 32)
			switch {
			case r >= 0xd800 && r <= 0xdbff:
				if high {
					return i, false
				}
				high = true
			case r >= 0xdc00 && r <= 0xdfff:
				if !high {
					return i, false
				}
				high = false
			case high:
				return i, false
			}
			i += 5
		default:
			if high {
				return i, false
			}
		}
	}
	return i, !high
}

// numericFits reports whether the JSON number s fits PostgreSQL's
// numeric, the type jsonb stores numbers in: the leading digit at most
// 131071 places before the decimal point (a base-10000 weight of 32767),
// at most 16383 digits after it (counting the zeros the exponent adds),
// and an exponent of less than 2^30-1 either way.
func numericFits(s string) bool {
	s = strings.TrimPrefix(s, "-")
	mantissa, exp, hasExp := strings.Cut(strings.ToLower(s), "e")
	intPart, frac, _ := strings.Cut(mantissa, ".")
	exponent := 0
	if hasExp {
		n, err := strconv.Atoi(exp)
		if err != nil || n >= math.MaxInt32/2 || n <= -(math.MaxInt32/2) {
			return false
		}
		exponent = n
	}
	if len(frac)-exponent > 16383 {
		return false
	}
	digits := intPart + frac
	first := strings.IndexFunc(digits, func(r rune) bool { return r != '0' })
	if first < 0 {
		return true // zero
	}
	return len(intPart)-1-first+exponent < 131072
}
