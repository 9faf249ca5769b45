package redis_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/connect"
	"github.com/rheo-go/rheo/driver/redis/redistest"
)

// TestReadmeQuickstart runs the README's Go quickstart, unchanged but for its
// database URL, as a program that blank-imports this driver, on Redis:
// the README's block (which tests/go checks is example_test.go's
// Example) is written out as a main package with the URL of a Redis
// database of the test's own, built and run with this module, and its
// output compared with the README's "// Output:" lines.
func TestReadmeQuickstart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program: skipped with -short")
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(string(readme), -1)
	require.Len(t, blocks, 1, "the README's Go blocks")
	block := blocks[0][1]
	code, output, found := strings.Cut(block, "// Output:\n")
	require.True(t, found, "the README's quickstart has an Output")
	var want strings.Builder
	for line := range strings.Lines(output) {
		want.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "//"), " "))
	}

	// A database of its own on the shared server: the quickstart's
	// stream is named "orders", as other tests' may be.
	url := strings.TrimSuffix(redistest.StandaloneURL(t), "/0") + "/9"
	ctx := context.Background()
	drv, err := connect.Open(ctx, url, nil)
	require.NoError(t, err, "open %s", url)
	dropOrders := func() {
		_, err := drv.DropStream(context.WithoutCancel(ctx), "orders", &rheo.DropOptions{Confirm: true})
		if !errors.Is(err, rheo.ErrStreamNotFound) {
			require.NoError(t, err, "drop the quickstart's stream")
		}
	}
	dropOrders()
	t.Cleanup(func() {
		dropOrders()
		_ = drv.Close()
	})

	const sqliteURL = `"sqlite::memory:"`
	require.Equal(t, 1, strings.Count(code, sqliteURL), "the quickstart opens %s once", sqliteURL)
	code = strings.Replace(code, sqliteURL, strconv.Quote(url), 1)
	program := `package main

import (
	"context"
	"fmt"
	"log"
	"slices"
	"sync"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/connect"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/worker"

	_ "github.com/rheo-go/rheo/driver/redis"
)

func main() {
` + code + "}\n"
	dir := t.TempDir()
	mainFile := filepath.Join(dir, "main.go")
	require.NoError(t, os.WriteFile(mainFile, []byte(program), 0o600))
	cmd := exec.Command("go", "run", mainFile)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go run the quickstart on %s:\n%s\nstderr:\n%s", url, program, stderr.String())
	require.Equal(t, want.String(), string(out), "the quickstart's output on Redis")
}
