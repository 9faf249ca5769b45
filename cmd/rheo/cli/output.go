package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/rheo-go/rheo/internal/textsafe"
)

// timeLayout prints timestamps in UTC to the millisecond.
const timeLayout = "2006-01-02T15:04:05.000Z07:00"

// maxJSONCell is the most characters of a JSON document shown in a table
// cell; --output json shows it whole.
const maxJSONCell = 60

// table collects rows and prints them aligned under their headers.
type table struct {
	header []string
	rows   [][]string
}

func newTable(header ...string) *table {
	return &table{header: header}
}

// add appends a row; each cell is formatted by formatCell.
func (t *table) add(cells ...any) {
	row := make([]string, len(cells))
	for i, cell := range cells {
		row[i] = formatCell(cell)
	}
	t.rows = append(t.rows, row)
}

func (t *table) write(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(t.header, "\t"))
	for _, row := range t.rows {
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	return tw.Flush()
}

// blank is a table cell left empty, such as the columns of a total row
// that have no total.
type blank struct{}

// formatCell renders one table cell; absent values print as "-". Control
// and invisible characters of stored text are escaped (package
// textsafe): a table goes to a terminal, where an ESC in a key or a
// reason would be a command. JSON output stays exact.
func formatCell(v any) string {
	return textsafe.Visible(formatValue(v))
}

func formatValue(v any) string {
	switch v := v.(type) {
	case blank:
		return ""
	case string:
		if v == "" {
			return "-"
		}
		return strings.Join(strings.Fields(v), " ")
	case time.Time:
		return v.UTC().Format(timeLayout)
	case *time.Time:
		if v == nil {
			return "-"
		}
		return v.UTC().Format(timeLayout)
	case json.RawMessage:
		return compactJSON(v, maxJSONCell)
	default:
		return fmt.Sprint(v)
	}
}

// compactJSON prints a JSON document on one line, cut to max characters.
func compactJSON(doc json.RawMessage, max int) string {
	if len(doc) == 0 {
		return "-"
	}
	var b bytes.Buffer
	if err := json.Compact(&b, doc); err != nil {
		return string(doc)
	}
	s := b.String()
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	return string([]rune(s)[:max-1]) + "…"
}

// writeJSON prints v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// emit prints v as JSON under --output json, and calls table otherwise.
func (c *call) emit(v any, table func(w io.Writer) error) error {
	if c.json {
		return writeJSON(c.stdout, v)
	}
	return table(c.stdout)
}

// writeJSONLine prints v as JSON on one line.
func writeJSONLine(w io.Writer, v any) error {
	return json.NewEncoder(w).Encode(v)
}
