package cli

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestNoDriverImports keeps the drivers' errors in the drivers: the
// command and the dashboard it serves put rheo.Kind into words, and read
// no database driver's error types themselves.
func TestNoDriverImports(t *testing.T) {
	for _, dir := range []string{".", filepath.Join("..", "..", "..", "dashboard")} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, src, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range f.Imports {
				name, _ := strconv.Unquote(imp.Path.Value)
				if strings.HasPrefix(name, "github.com/jackc/") || strings.HasPrefix(name, "modernc.org/") ||
					strings.HasPrefix(name, "github.com/mattn/") {
					t.Errorf("%s imports %s: classify the failure in the driver (rheo.Kind) instead", path, name)
				}
			}
		}
	}
}
