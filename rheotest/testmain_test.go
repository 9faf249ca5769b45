package rheotest_test

import (
	"os"
	"testing"

	"github.com/rheo-go/rheo/internal/testskip"
)

// TestMain reports the tests skipped for lack of PostgreSQL (or of what
// else they need) in one line, which go test shows without -v.
func TestMain(m *testing.M) {
	os.Exit(testskip.Run(m))
}
