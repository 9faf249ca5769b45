package driverutil

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// JSON values compared as PostgreSQL's jsonb compares them, for the
// drivers that cannot ask PostgreSQL.

// JSONEqual reports whether two valid JSON texts hold the same value, as
// PostgreSQL's jsonb equality sees it: object key order and whitespace do
// not matter, the last of duplicate keys wins, and numbers compare by
// value (1.0 equals 1).
func JSONEqual(a, b []byte) bool {
	va, errA := DecodeJSON(a)
	vb, errB := DecodeJSON(b)
	return errA == nil && errB == nil && SameJSON(va, vb)
}

// DecodeJSON decodes one JSON value with its numbers as json.Number, so
// that SameJSON compares them by value.
func DecodeJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

// SameJSON reports whether two decoded JSON values (DecodeJSON) are
// equal as PostgreSQL's jsonb equality sees it: object key order does
// not matter and numbers compare by value.
func SameJSON(a, b any) bool {
	switch a := a.(type) {
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for k, va := range a {
			vb, ok := b[k]
			if !ok || !SameJSON(va, vb) {
				return false
			}
		}
		return true
	case []any:
		b, ok := b.([]any)
		return ok && slices.EqualFunc(a, b, SameJSON)
	case json.Number:
		b, ok := b.(json.Number)
		return ok && sameNumber(string(a), string(b))
	default: // string, bool or nil
		return a == b
	}
}

// sameNumber compares two JSON numbers by value, exactly, by reducing
// each to sign, significant digits and decimal exponent.
func sameNumber(a, b string) bool {
	if a == b {
		return true
	}
	na, okA := normalizeNumber(a)
	nb, okB := normalizeNumber(b)
	return okA && okB && na == nb
}

// decimal is a JSON number by value.
type decimal struct {
	negative bool
	digits   string // no leading or trailing zeros; "" for zero
	exponent int    // value = digits × 10^exponent
}

// normalizeNumber reduces a JSON number to its decimal form.
func normalizeNumber(s string) (decimal, bool) {
	var d decimal
	if strings.HasPrefix(s, "-") {
		d.negative, s = true, s[1:]
	}
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		exp, err := strconv.Atoi(strings.TrimPrefix(s[i+1:], "+"))
		if err != nil {
			return d, false
		}
		d.exponent, s = exp, s[:i]
	}
	intPart, frac, _ := strings.Cut(s, ".")
	d.exponent -= len(frac)
	digits := strings.TrimLeft(intPart+frac, "0")
	trimmed := strings.TrimRight(digits, "0")
	d.exponent += len(digits) - len(trimmed)
	d.digits = trimmed
	if d.digits == "" {
		return decimal{}, true // -0 and 0.00 are zero
	}
	return d, true
}

// JSONContains reports whether doc contains pattern, decoded JSON values,
// as PostgreSQL's jsonb @> decides below the top level: an object
// contains an object whose every key it has with a value containing the
// pattern's; an array contains an array each of whose elements it
// contains (a scalar as an equal element, an object or array inside some
// element of the same kind); scalars contain equal scalars of the same
// JSON type, numbers compared by value.
func JSONContains(doc, pattern any) bool {
	switch p := pattern.(type) {
	case map[string]any:
		d, ok := doc.(map[string]any)
		if !ok {
			return false
		}
		for k, pv := range p {
			dv, ok := d[k]
			if !ok || !JSONContains(dv, pv) {
				return false
			}
		}
		return true
	case []any:
		d, ok := doc.([]any)
		if !ok {
			return false
		}
		for _, pe := range p {
			if !slices.ContainsFunc(d, func(de any) bool { return JSONContains(de, pe) }) {
				return false
			}
		}
		return true
	default:
		return SameJSON(doc, pattern)
	}
}

// CanonicalNumber is a text of the JSON number s that every spelling of
// its value shares (1.0 and 1, 1e2 and 100), or false for a text that is
// not a number.
func CanonicalNumber(s string) (string, bool) {
	n, ok := normalizeNumber(s)
	if !ok {
		return "", false
	}
	return fmt.Sprintf("%t:%s:%d", n.negative, n.digits, n.exponent), true
}
