package cli

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNoDriverImports keeps the drivers' errors in the drivers: the
// command and the dashboard it serves put rheo.Kind into words, and read
// no database driver's error types themselves.
func TestNoDriverImports(t *testing.T) {
	for _, dir := range []string{".", filepath.Join("..", "..", "..", "dashboard")} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		require.NoError(t, err)
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			src, err := os.ReadFile(path)
			require.NoError(t, err)
			f, err := parser.ParseFile(token.NewFileSet(), path, src, parser.ImportsOnly)
			require.NoError(t, err)
			for _, imp := range f.Imports {
				name, _ := strconv.Unquote(imp.Path.Value)
				for _, driver := range []string{"github.com/jackc/", "modernc.org/", "github.com/mattn/", "github.com/redis/"} {
					assert.False(t, strings.HasPrefix(name, driver), "%s imports %s: classify the failure in the driver (rheo.Kind) instead", path, name)
				}
			}
		}
	}
}
