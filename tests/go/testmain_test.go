package tests

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/rheo-go/rheo/internal/testskip"
)

// TestMain reports the tests skipped for lack of PostgreSQL (or of what
// else they need) in one line, which go test shows without -v, and
// checks that the tests leave no goroutine behind. The tests run in
// parallel, each on a database of its own, so goroutines are checked
// once all have run, not after each test.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(testskip.Wrap(m))
}
