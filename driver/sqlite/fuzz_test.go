package sqlite

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"math/big"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver/driverutil"
)

// sqlRoute is the routing of reference §4.1 written as the SQL does it, on the text
// of the md5: ('x' || substr(md5(key), 1, 8))::bit(32)::bigint % count.
func sqlRoute(key string, count int) int {
	sum := md5.Sum([]byte(key))
	first8 := hex.EncodeToString(sum[:])[:8]
	n, err := strconv.ParseUint(first8, 16, 64)
	if err != nil {
		panic(err)
	}
	return int(n % uint64(count))
}

// FuzzPayloadKey checks payload->>'key' as the SQLite driver reads it: a
// string key comes back as it was written and routes as the SQL does;
// any other field value comes back as JSON text with the same value; and
// the lineage check measures those same texts.
func FuzzPayloadKey(f *testing.F) {
	for _, s := range []struct {
		key   string
		raw   string
		count int
	}{
		{"k1", `{"key": "k1"}`, 4},
		{"", `{"key": null}`, 1},
		{"a\"b\\c", `{"key": 42, "other": true}`, 7},
		{"ümlaut 😀", `{"key": {"b": [1, 2], "a": "x"}}`, 4096},
		{strings.Repeat("k", 1025), `{"correlation_id": 1e3, "key": [true]}`, 2},
		{"\u2028", `{"key": "\ud83d\ude00", "key": "last"}`, 3},
	} {
		f.Add(s.key, []byte(s.raw), s.count)
	}
	f.Fuzz(func(t *testing.T, key string, raw []byte, count int) {
		if count < 1 || count > driverutil.MaxPartitionCount {
			count = 1 + int(uint(count)%driverutil.MaxPartitionCount)
		}
		if utf8.ValidString(key) {
			payload, err := json.Marshal(map[string]any{"key": key, "n": 1})
			require.NoError(t, err)
			got := driverutil.PayloadKey(payload)
			require.Equal(t, key, got, "driverutil.PayloadKey(%s) = %q, want %q", payload, got, key)
			route, want := rheo.PartitionForKey(driverutil.PayloadKey(payload), count), sqlRoute(key, count)
			require.Equal(t, want, route, "key %q routes to %d of %d, the SQL to %d", key, route, count, want)
			meta, err := json.Marshal(map[string]string{rheo.MetaCausationID: key})
			require.NoError(t, err)
			err = driverutil.CheckLineage(meta)
			require.Equal(t, len(key) > driverutil.MaxTextBytes, err != nil, "checkLineage of a causation_id of %d bytes = %v", len(key), err)
		}

		if !json.Valid(raw) || !driverutil.IsObject(raw) {
			return
		}
		var fields map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(raw, &fields))
		got := driverutil.PayloadKey(raw)
		value, ok := fields["key"]
		var s string
		switch {
		case !ok || string(value) == "null":
			require.Empty(t, got, "driverutil.PayloadKey(%s) = %q without a key", raw, got)
		case json.Unmarshal(value, &s) == nil:
			require.Equal(t, s, got, "driverutil.PayloadKey(%s) = %q, want %q", raw, got, s)
		default:
			require.True(t, json.Valid([]byte(got)) && driverutil.JSONEqual([]byte(got), value), "driverutil.PayloadKey(%s) = %q, not the JSON of %s", raw, got, value)
		}
		tooLong := false
		for _, k := range driverutil.LineageKeys {
			tooLong = tooLong || len(driverutil.FieldText(fields[k])) > driverutil.MaxTextBytes
		}
		err := driverutil.CheckLineage(raw)
		require.Equal(t, tooLong, err != nil, "driverutil.CheckLineage(%s) = %v", raw, err)
	})
}

// FuzzJSONEqual checks jsonEqual against a reference reading of both
// documents with numbers as exact rationals, and that it is reflexive,
// symmetric and blind to formatting.
func FuzzJSONEqual(f *testing.F) {
	for _, s := range [][2]string{
		{`{"a": 1, "b": [1, 2]}`, `{"b":[1,2],"a":1}`},
		{`{"a": 1}`, `{"a": 1.0}`},
		{`{"a": 100}`, `{"a": 1e2}`},
		{`{"a": -0}`, `{"a": 0.00}`},
		{`{"a": 12345678901234567890}`, `{"a": 12345678901234567891}`},
		{`{"a": 1, "a": 2}`, `{"a": 2}`},
		{`[1, 2]`, `[2, 1]`},
		{`"1"`, `1`},
		{`{"a": null}`, `{}`},
		{`{"a": "\u00e9"}`, `{"a": "é"}`},
		{`1E+2`, `100.000`},
		{`not json`, `{}`},
	} {
		f.Add([]byte(s[0]), []byte(s[1]))
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		if !json.Valid(a) {
			return // jsonEqual is for valid JSON, which the drivers check first
		}
		require.True(t, driverutil.JSONEqual(a, a), "driverutil.JSONEqual(%q, itself) is false", a)
		var indented bytes.Buffer
		require.NoError(t, json.Indent(&indented, a, "", "\t"))
		require.True(t, driverutil.JSONEqual(a, indented.Bytes()), "driverutil.JSONEqual(%q, %q) is false", a, indented.Bytes())
		if !json.Valid(b) {
			return
		}
		got := driverutil.JSONEqual(a, b)
		require.Equal(t, driverutil.JSONEqual(b, a), got, "driverutil.JSONEqual(%q, %q) is not symmetric", a, b)
		ra, okA := referenceJSON(a)
		rb, okB := referenceJSON(b)
		if okA && okB {
			want := referenceEqual(ra, rb)
			require.Equal(t, want, got, "driverutil.JSONEqual(%q, %q) = %v, want %v", a, b, got, want)
		}
	})
}

// referenceJSON decodes v with every number as an exact rational; false
// when a number is too large to make one of cheaply.
func referenceJSON(v []byte) (any, bool) {
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, false
	}
	ok := true
	var convert func(any) any
	convert = func(x any) any {
		switch x := x.(type) {
		case map[string]any:
			for k, v := range x {
				x[k] = convert(v)
			}
		case []any:
			for i, v := range x {
				x[i] = convert(v)
			}
		case json.Number:
			if exp := strings.IndexAny(string(x), "eE"); exp >= 0 {
				if e, err := strconv.Atoi(string(x)[exp+1:]); err != nil || e > 1000 || e < -1000 {
					ok = false
					return x
				}
			}
			r, valid := new(big.Rat).SetString(string(x))
			if !valid {
				ok = false
				return x
			}
			return r
		}
		return x
	}
	doc = convert(doc)
	return doc, ok
}

func referenceEqual(a, b any) bool {
	switch a := a.(type) {
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for k, va := range a {
			vb, ok := b[k]
			if !ok || !referenceEqual(va, vb) {
				return false
			}
		}
		return true
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for i := range a {
			if !referenceEqual(a[i], b[i]) {
				return false
			}
		}
		return true
	case *big.Rat:
		b, ok := b.(*big.Rat)
		return ok && a.Cmp(b) == 0
	default:
		return a == b
	}
}
