package redis

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"regexp"

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

// leaseSeed is the random seed a fetch draws its lease ids from: 128
// bits, so that the ids of every fetch are unguessable and never meet.
func leaseSeed() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand never fails
	return hex.EncodeToString(b[:])
}
