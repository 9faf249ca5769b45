package driverutil

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/rheo-go/rheo"
)

// The rules of an event's fields that the drivers without SQL functions
// (SQLite, Redis) check as rheo._append and the settles do.

// CheckText rejects text PostgreSQL cannot store, so that both drivers
// accept the same ids and keys: invalid UTF-8 and NUL characters. Like
// checkJSON it runs before anything else.
func CheckText(what, s string) error {
	if !utf8.ValidString(s) || strings.ContainsRune(s, 0) {
		return rheo.Errorf(rheo.ErrInvalidArgument, "%s %q is not valid UTF-8 text without NUL characters", what, s)
	}
	return nil
}

// IsObject reports whether v, valid JSON, is an object.
func IsObject(v json.RawMessage) bool {
	v = bytes.TrimLeft(v, " \t\r\n")
	return len(v) > 0 && v[0] == '{'
}

// PayloadKey is payload->>'key' as PostgreSQL gives it: a string
// unquoted, "" for null or no key, other values as JSON text. payload is
// a valid JSON object.
func PayloadKey(payload json.RawMessage) string {
	var fields map[string]json.RawMessage
	if json.Unmarshal(payload, &fields) != nil {
		return ""
	}
	return FieldText(fields["key"])
}

// LineageKeys are the metadata keys whose values are at most
// MaxTextBytes long, in the order rheo._append checks them.
var LineageKeys = []string{rheo.MetaCorrelationID, rheo.MetaCausationID, rheo.MetaProducer, rheo.MetaSchema, rheo.MetaSchemaVersion}

// CheckLineage reports a lineage value of metadata, a valid JSON object,
// longer than MaxTextBytes as text (metadata->>key) as
// invalid_argument, like rheo._append.
func CheckLineage(metadata json.RawMessage) error {
	// A value's text is never longer than the document holding it.
	if len(metadata) <= MaxTextBytes {
		return nil
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(metadata, &fields) != nil {
		return nil
	}
	for _, key := range LineageKeys {
		if err := CheckLength("metadata "+key, FieldText(fields[key])); err != nil {
			return err
		}
	}
	return nil
}

// FieldText is a field of a JSON object as PostgreSQL's ->> gives it,
// from the field's raw value: a string unquoted, "" for null or a
// missing field (nil), other values as compact JSON text (PostgreSQL
// prints objects with spaces and numbers in its own form, so these may
// differ by a few bytes).
func FieldText(raw json.RawMessage) string {
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

// ParseLeaseID parses a lease id into the canonical text stored in
// rheo_deliveries. A string that is not a UUID cannot have been issued,
// so it is stale.
func ParseLeaseID(s string) (string, error) {
	id, err := uuid.Parse(s)
	if err != nil {
		return "", rheo.Errorf(rheo.ErrStaleLease, "lease %q was never issued", s)
	}
	return id.String(), nil
}

// NewEventID returns a UUIDv7 for an event appended at nowMicros: 48 bits
// of Unix milliseconds over a random UUID, the construction PostgreSQL's
// append uses, so generated ids sort by time on both.
func NewEventID(nowMicros int64) string {
	id := uuid.New()
	var millis [8]byte
	binary.BigEndian.PutUint64(millis[:], uint64(nowMicros/1000))
	copy(id[:6], millis[2:])
	id[6] = id[6]&0x0f | 0x70 // version 7
	return id.String()
}

// AllPartitions returns 0..count-1.
func AllPartitions(count int) []int {
	all := make([]int, count)
	for i := range all {
		all[i] = i
	}
	return all
}

// OutOfRange is the invalid_partition error of partition p of a stream
// of count partitions.
func OutOfRange(p, count int) error {
	return rheo.Errorf(rheo.ErrInvalidPartition, "partition %d is outside 0..%d", p, count-1)
}
