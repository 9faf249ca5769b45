package testdb

import (
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// DescribeError spells out a server error raised by script with its
// detail and the place it was raised, including the line of script it
// points at; any other error is its message.
func DescribeError(err error, script string) string {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return err.Error()
	}
	s := fmt.Sprintf("%s (SQLSTATE %s)", pgErr.Message, pgErr.Code)
	// Position counts characters from 1 in the whole script.
	if runes := []rune(script); pgErr.Position > 0 && int(pgErr.Position) <= len(runes) {
		s += fmt.Sprintf(" at script line %d", 1+strings.Count(string(runes[:pgErr.Position-1]), "\n"))
	}
	if pgErr.Detail != "" {
		s += "\nDETAIL: " + pgErr.Detail
	}
	if pgErr.Where != "" {
		s += "\nWHERE: " + pgErr.Where
	}
	if pgErr.InternalQuery != "" {
		s += "\nQUERY: " + pgErr.InternalQuery
	}
	return s
}
