package sqlite

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// quotaCase is one row of the table of quota cases.
type quotaCase struct {
	avail    []int64
	maxCount int
	start    int
	quota    []int
	line     string
}

// quotaCases reads the table of quota cases that tests/sql/_quota_test.sql
// checks rheo._quota on: the rows between its markers, one per line.
func quotaCases(t *testing.T) []quotaCase {
	t.Helper()
	script, err := os.ReadFile("../../tests/sql/_quota_test.sql")
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(script), "-- quota cases begin\n")
	require.True(t, ok, "the quota cases begin marker")
	table, _, ok := strings.Cut(rest, "-- quota cases end\n")
	require.True(t, ok, "the quota cases end marker")
	row := regexp.MustCompile(`^\s*\('\{([0-9,]*)\}', (\d+), (\d+), '\{([0-9,]*)\}'\)[,;]$`)
	ints := func(list string) []int64 {
		var out []int64
		for f := range strings.SplitSeq(list, ",") {
			if f != "" {
				n, err := strconv.ParseInt(f, 10, 64)
				require.NoError(t, err)
				out = append(out, n)
			}
		}
		return out
	}
	var cases []quotaCase
	for line := range strings.SplitSeq(strings.TrimSpace(table), "\n") {
		m := row.FindStringSubmatch(line)
		require.NotNil(t, m, "a quota case in the form ('{…}', n, n, '{…}'): %s", line)
		c := quotaCase{avail: ints(m[1]), quota: []int{}, line: strings.TrimSpace(line)}
		c.maxCount, _ = strconv.Atoi(m[2])
		c.start, _ = strconv.Atoi(m[3])
		for _, q := range ints(m[4]) {
			c.quota = append(c.quota, int(q))
		}
		cases = append(cases, c)
	}
	return cases
}

// The SQLite driver deals quotas lease by lease, rheo._quota in closed
// form: both are checked on the one table of cases.
func TestQuota(t *testing.T) {
	cases := quotaCases(t)
	require.GreaterOrEqual(t, len(cases), 10, "the quota table")
	for _, c := range cases {
		require.Equal(t, c.quota, quota(make([]int, len(c.avail)), c.avail, c.maxCount, c.start), c.line)
	}
}

// A fetch of a group ordered by key deals again what its walks could not
// fill, on top of the quotas dealt before.
func TestQuotaOnTopOfQuotas(t *testing.T) {
	for _, tc := range []struct {
		quotas      []int
		avail       []int64
		left, start int
		want        []int
	}{
		{[]int{1, 1, 1}, []int64{1, 4, 4}, 3, 0, []int{1, 3, 2}},
		{[]int{2, 0}, []int64{2, 0}, 5, 1, []int{2, 0}},
		{[]int{0, 2, 0}, []int64{3, 5, 3}, 2, 2, []int{1, 2, 1}},
		{[]int{1}, []int64{9}, 0, 0, []int{1}},
	} {
		quotas := append([]int(nil), tc.quotas...)
		require.Equal(t, tc.want, quota(tc.quotas, tc.avail, tc.left, tc.start), "%+v", tc)
		require.Equal(t, quotas, tc.quotas, "quota leaves its input as it was")
	}
}

func TestFreshCount(t *testing.T) {
	for _, tc := range []struct {
		next, high int64
		maxCount   int
		want       int64
	}{
		{1, 10, 5, 5},
		{8, 10, 5, 3},
		{11, 10, 5, 0},
		{40, 10, 5, 0},
		{1, 0, 5, 0},
		{3, 3, 0, 0},
	} {
		require.Equal(t, tc.want, freshCount(tc.next, tc.high, tc.maxCount), "%+v", tc)
	}
}
