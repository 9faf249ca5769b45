package migrate

import (
	"fmt"
	"regexp"
	"strings"
)

// stepKind is how a step of a schema migration runs. The rules a
// migration follows to run under load are in docs/upgrading.md.
type stepKind string

const (
	// stepTx runs in a transaction of its own, with the short lock
	// timeout: it may take locks that stop the application, for as long
	// as a catalog change takes. What it leaves must work with the
	// previous release's functions, which run until the switch.
	stepTx stepKind = "tx"
	// stepOnline runs in a transaction of its own and takes only locks
	// that let reads and writes through (VALIDATE CONSTRAINT, storage
	// parameters), so it may wait longer for them.
	stepOnline stepKind = "online"
	// stepConcurrently runs outside a transaction: CREATE INDEX
	// CONCURRENTLY. An invalid index that a failed try left behind is
	// dropped before the next try.
	stepConcurrently stepKind = "concurrently"
	// stepBatch is one statement that does a bounded part of a backfill;
	// it runs again, each time in a transaction of its own, until it
	// changes (or, a SELECT, returns) no row.
	stepBatch stepKind = "batch"
	// stepSwitch runs in the switch's first transaction, with every
	// table locked at its start: catalog changes that need the tables
	// still (SET NOT NULL proven by a valid CHECK), catch-ups of what the
	// previous release's functions did meanwhile. It must be short, and
	// what it leaves must still work with those functions.
	stepSwitch stepKind = "switch"
	// stepInstall runs in the switch's second transaction, just before
	// the functions are installed, and locks no table: making room for
	// the new functions (renaming old signatures out of their way).
	stepInstall stepKind = "install"
	// stepFollowUp runs after the switch, once every transaction that
	// began before it has ended (so that no call of the previous
	// release's functions is in flight), each statement in a transaction
	// of its own; it must be idempotent.
	stepFollowUp stepKind = "followup"
)

// step is one step of a schema migration.
type step struct {
	kind stepKind
	sql  string
}

// migration is a schema migration cut into its steps.
type migration struct {
	version int32
	name    string
	steps   []step
}

// hasSwitch reports whether the migration needs the switch: steps that
// run in it or after it.
func (m migration) hasSwitch() bool {
	for _, s := range m.steps {
		if s.kind == stepSwitch || s.kind == stepInstall || s.kind == stepFollowUp {
			return true
		}
	}
	return false
}

// stepMarker starts a step: a line "-- rheo:step KIND", or "-- rheo:step"
// for a tx step. The SQL before the first marker is a tx step.
var stepMarker = regexp.MustCompile(`(?m)^--[ \t]*rheo:step(?:[ \t]+(\S+))?[ \t]*$`)

// parseSteps cuts a migration's SQL into its steps. Parts that hold only
// comments are left out.
func parseSteps(sql string) ([]step, error) {
	var steps []step
	add := func(kind stepKind, body string) {
		if hasStatement(body) {
			steps = append(steps, step{kind: kind, sql: strings.TrimSpace(body)})
		}
	}
	locs := stepMarker.FindAllStringSubmatchIndex(sql, -1)
	prev, kind, lead := 0, stepTx, ""
	for _, loc := range locs {
		// The comment just above a marker describes the next step.
		body, next := splitTrailingComment(sql[prev:loc[0]])
		add(kind, lead+body)
		lead = next
		kind = stepTx
		if loc[2] >= 0 {
			kind = stepKind(sql[loc[2]:loc[3]])
		}
		switch kind {
		case stepTx, stepOnline, stepConcurrently, stepBatch, stepSwitch, stepInstall, stepFollowUp:
		default:
			return nil, fmt.Errorf("unknown step kind %q", kind)
		}
		prev = loc[1]
		if prev < len(sql) && sql[prev] == '\n' {
			prev++
		}
	}
	add(kind, lead+sql[prev:])
	return steps, nil
}

// splitLeadingComment cuts sql before its first line that is not a
// comment or blank.
func splitLeadingComment(sql string) (comment, body string) {
	lines := strings.SplitAfter(sql, "\n")
	i := 0
	for i < len(lines) {
		line := strings.TrimSpace(lines[i])
		if line != "" && !strings.HasPrefix(line, "--") {
			break
		}
		i++
	}
	return strings.Join(lines[:i], ""), strings.Join(lines[i:], "")
}

// splitTrailingComment cuts sql after its last line that is not a comment
// or blank.
func splitTrailingComment(sql string) (body, comment string) {
	lines := strings.SplitAfter(sql, "\n")
	i := len(lines)
	for i > 0 {
		line := strings.TrimSpace(lines[i-1])
		if line != "" && !strings.HasPrefix(line, "--") {
			break
		}
		i--
	}
	return strings.Join(lines[:i], ""), strings.Join(lines[i:], "")
}

// hasStatement reports whether sql holds more than comments and blanks.
func hasStatement(sql string) bool {
	for _, line := range strings.Split(sql, "\n") {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "--") {
			return true
		}
	}
	return false
}

// loadMigrations returns the schema migrations cut into their steps.
func loadMigrations() ([]migration, error) {
	ms, err := loadSchema()
	if err != nil {
		return nil, err
	}
	out := make([]migration, 0, len(ms))
	for _, m := range ms {
		steps, err := parseSteps(m.UpSQL)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", m.Name, err)
		}
		out = append(out, migration{version: m.Sequence, name: m.Name, steps: steps})
	}
	return out, nil
}

// scriptSQL is the migration as one block of SQL for the install script,
// which runs in one transaction: indexes are built without CONCURRENTLY
// and each batch runs until it changes no row. The follow-ups are left
// out: the script records them for later (see PostgresSQL).
func (m migration) scriptSQL() string {
	var b strings.Builder
	for _, s := range m.steps {
		switch s.kind {
		case stepConcurrently:
			b.WriteString(concurrently.ReplaceAllString(s.sql, "INDEX"))
		case stepBatch:
			comment, body := splitLeadingComment(s.sql)
			b.WriteString(comment)
			body = strings.TrimSuffix(strings.TrimSpace(body), ";")
			if len(body) > 6 && strings.EqualFold(body[:6], "SELECT") {
				body = "PERFORM" + body[6:] // a query without a destination, in PL/pgSQL
			}
			b.WriteString("DO " + dollarQuote("BEGIN\n  LOOP\n"+body+";\n  EXIT WHEN NOT FOUND;\n  END LOOP;\nEND", "rheo_batch") + ";")
		case stepFollowUp:
			continue
		default:
			b.WriteString(s.sql)
		}
		b.WriteString("\n\n")
	}
	return b.String()
}

// followUps returns the follow-ups of the migration that the steps of
// kind after record: those that follow them up to the next switch or
// install step.
func (m migration) followUps(after stepKind) []string {
	var out []string
	var last stepKind
	for _, s := range m.steps {
		switch s.kind {
		case stepSwitch, stepInstall:
			last = s.kind
		case stepFollowUp:
			if last == after || (last == "" && after == stepSwitch) {
				out = append(out, s.sql)
			}
		}
	}
	return out
}

var concurrently = regexp.MustCompile(`(?i)\bINDEX\s+CONCURRENTLY\b`)
