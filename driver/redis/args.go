package redis

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver/driverutil"
)

// validName is the pattern of reference §1.2 for stream and group names.
var validName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$`)

const nameRule = "1 to 128 characters of A-Z a-z 0-9 . _ : / -, starting with a letter or digit"

// checkJSON rejects bytes that are not JSON at all, or that PostgreSQL's
// jsonb or SQLite's JSON functions cannot take (driverutil.CheckJSON), before
// anything else, as PostgreSQL does when it receives the argument.
// Whether the value is an object is checked with the operation's other
// arguments, in the order of reference §1.4.
func checkJSON(what string, v json.RawMessage) error {
	return driverutil.CheckJSON(what, v)
}

// checkText rejects text PostgreSQL cannot store, so that both drivers
// accept the same ids and keys: invalid UTF-8 and NUL characters. Like
// checkJSON it runs before anything else.
func checkText(what, s string) error {
	if !utf8.ValidString(s) || strings.ContainsRune(s, 0) {
		return rheo.Errorf(rheo.ErrInvalidArgument, "%s %q is not valid UTF-8 text without NUL characters", what, s)
	}
	return nil
}

// isObject reports whether v, valid JSON, is an object.
func isObject(v json.RawMessage) bool {
	v = bytes.TrimLeft(v, " \t\r\n")
	return len(v) > 0 && v[0] == '{'
}

// payloadKey is payload->>'key' as PostgreSQL gives it: a string
// unquoted, "" for null or no key, other values as JSON text. payload is
// a valid JSON object.
func payloadKey(payload json.RawMessage) string {
	var fields map[string]json.RawMessage
	if json.Unmarshal(payload, &fields) != nil {
		return ""
	}
	return fieldText(fields["key"])
}

// lineageKeys are the metadata keys whose values are at most
// driverutil.MaxTextBytes long, in the order rheo._append checks them.
var lineageKeys = []string{rheo.MetaCorrelationID, rheo.MetaCausationID, rheo.MetaProducer, rheo.MetaSchema, rheo.MetaSchemaVersion}

// checkLineage reports a lineage value of metadata, a valid JSON object,
// longer than driverutil.MaxTextBytes as text (metadata->>key) as
// invalid_argument, like rheo._append.
func checkLineage(metadata json.RawMessage) error {
	// A value's text is never longer than the document holding it.
	if len(metadata) <= driverutil.MaxTextBytes {
		return nil
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(metadata, &fields) != nil {
		return nil
	}
	for _, key := range lineageKeys {
		if err := driverutil.CheckLength("metadata "+key, fieldText(fields[key])); err != nil {
			return err
		}
	}
	return nil
}

// fieldText is a field of a JSON object as PostgreSQL's ->> gives it,
// from the field's raw value: a string unquoted, "" for null or a
// missing field (nil), other values as compact JSON text (PostgreSQL
// prints objects with spaces and numbers in its own form, so these may
// differ by a few bytes).
func fieldText(raw json.RawMessage) string {
	if raw == nil || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var compact bytes.Buffer
	if json.Compact(&compact, raw) != nil {
		return string(raw)
	}
	return compact.String()
}

// leaseIDArg parses a lease id into its canonical text. A string that is not a UUID cannot have been issued,
// so it is stale.
func leaseIDArg(s string) (string, error) {
	id, err := uuid.Parse(s)
	if err != nil {
		return "", rheo.Errorf(rheo.ErrStaleLease, "lease %q was never issued", s)
	}
	return id.String(), nil
}

// newEventID returns a UUIDv7 for an event appended at nowMicros: 48 bits
// of Unix milliseconds over a random UUID, the construction PostgreSQL's
// append uses, so generated ids sort by time on both.
func newEventID(nowMicros int64) string {
	id := uuid.New()
	var millis [8]byte
	binary.BigEndian.PutUint64(millis[:], uint64(nowMicros/1000))
	copy(id[:6], millis[2:])
	id[6] = id[6]&0x0f | 0x70 // version 7
	return id.String()
}

// leaseSeed is the random seed a fetch draws its lease ids from: 128
// bits, so that the ids of every fetch are unguessable and never meet.
func leaseSeed() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand never fails
	return hex.EncodeToString(b[:])
}

// allPartitions returns 0..count-1.
func allPartitions(count int) []int {
	all := make([]int, count)
	for i := range all {
		all[i] = i
	}
	return all
}

func outOfRange(p, count int) error {
	return rheo.Errorf(rheo.ErrInvalidPartition, "partition %d is outside 0..%d", p, count-1)
}

func decodeJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

func sameJSON(a, b any) bool {
	switch a := a.(type) {
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for k, va := range a {
			vb, ok := b[k]
			if !ok || !sameJSON(va, vb) {
				return false
			}
		}
		return true
	case []any:
		b, ok := b.([]any)
		return ok && slices.EqualFunc(a, b, sameJSON)
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

type decimal struct {
	negative bool
	digits   string // no leading or trailing zeros; "" for zero
	exponent int    // value = digits × 10^exponent
}

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
