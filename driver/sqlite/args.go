package sqlite

import (
	"encoding/json"
	"regexp"
	"slices"
	"strconv"

	"github.com/google/uuid"

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

// metadataArg defaults nil metadata to {}.
func metadataArg(m json.RawMessage) (json.RawMessage, error) {
	if m == nil {
		return json.RawMessage(`{}`), nil
	}
	if err := checkJSON("metadata", m); err != nil {
		return nil, err
	}
	return m, nil
}

// newLeaseID returns a fresh random lease id: the fencing token of one
// delivery.
func newLeaseID() string { return uuid.NewString() }

// intsJSON renders ints as a JSON array, for json_each.
func intsJSON(ints []int) string {
	b := make([]byte, 0, 2+4*len(ints))
	b = append(b, '[')
	for i, v := range ints {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(v), 10)
	}
	return string(append(b, ']'))
}

// stringsJSON renders strings as a JSON array, for json_each.
func stringsJSON(ss []string) string {
	b, _ := json.Marshal(ss) // marshalling a []string cannot fail
	return string(b)
}

// partitionScope validates a partitions argument against a stream's
// partition count and returns it sorted without duplicates; nil means
// every partition.
func partitionScope(partitions []int, count int) ([]int, error) {
	if partitions == nil {
		return driverutil.AllPartitions(count), nil
	}
	for _, p := range partitions {
		if p < 0 || p >= count {
			return nil, driverutil.OutOfRange(p, count)
		}
	}
	scope := slices.Clone(partitions)
	slices.Sort(scope)
	return slices.Compact(scope), nil
}
