package driverutil

import (
	"bytes"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"regexp"
	"slices"
	"strconv"

	"github.com/rheo-go/rheo"
)

// The cursors of rheo.query_page, for the drivers that page through a
// stream's history themselves: the same text as PostgreSQL's.

var (
	cursorAlphabet = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
	cursorText     = regexp.MustCompile(`^([a-z0-9]+)\.([0-9a-f]{16})\.([0-9]{1,19}(?:\.[0-9]{1,19})*)$`)
)

// QueryFingerprint ties a cursor to its stream, filters and direction:
// 16 hex digits of md5 over them, with the filter object made canonical
// (sorted keys, no spaces) so that the same Query gives the same
// fingerprint however its JSON is spelt.
func QueryFingerprint(stream string, q rheo.Query) (string, error) {
	filter, err := q.Filter()
	if err != nil {
		return "", err
	}
	decoded, err := DecodeJSON(filter)
	if err != nil {
		return "", err
	}
	canonical, err := json.Marshal(decoded)
	if err != nil {
		return "", err
	}
	direction := "asc"
	if q.Descending {
		direction = "desc"
	}
	sum := md5.Sum(slices.Concat([]byte(stream), []byte("\n"), canonical, []byte("\n"+direction)))
	return hex.EncodeToString(sum[:8]), nil
}

// EncodeQueryCursor renders a cursor as rheo.query_page does: base64url
// without padding of q1.<fingerprint>.<position>.<position>...
func EncodeQueryCursor(fingerprint string, positions []int64) string {
	b := []byte("q1." + fingerprint)
	for _, p := range positions {
		b = strconv.AppendInt(append(b, '.'), p, 10)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// DecodeQueryCursor returns the positions of a cursor issued for the
// query with this fingerprint and scope size. Not a cursor at all:
// invalid_argument. A cursor of another stream, filter, direction or
// version: cursor_not_found.
func DecodeQueryCursor(cursor, fingerprint string, scopeSize int) ([]int64, error) {
	malformed := rheo.Errorf(rheo.ErrInvalidArgument, "%q is not a query cursor", cursor)
	if !cursorAlphabet.MatchString(cursor) {
		return nil, malformed
	}
	text, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil {
		return nil, malformed
	}
	parts := cursorText.FindSubmatch(text)
	if parts == nil {
		return nil, malformed
	}
	var positions []int64
	for field := range bytes.SplitSeq(parts[3], []byte(".")) {
		p, err := strconv.ParseInt(string(field), 10, 64)
		if err != nil {
			return nil, malformed
		}
		positions = append(positions, p)
	}
	if string(parts[1]) != "q1" || string(parts[2]) != fingerprint || len(positions) != scopeSize {
		return nil, rheo.Errorf(rheo.ErrCursorNotFound, "cursor %q was not issued for this stream, filter and direction", cursor)
	}
	return positions, nil
}
