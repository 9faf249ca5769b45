package cli

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/rheo-go/rheo/connect"
)

// writeUsage prints the list of commands.
func writeUsage(w io.Writer) {
	databases := "PostgreSQL or SQLite"
	if schemes := connect.Schemes(); len(schemes) > 0 {
		databases = "PostgreSQL, SQLite or " + strings.Join(schemes, ", ")
	}
	fmt.Fprintf(w, `rheo: durable consumer groups over an immutable event log in %s

Usage: rheo COMMAND [arguments] [flags]

Commands:
`, databases)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, cmd := range commands() {
		fmt.Fprintf(tw, "  %s\t%s\n", cmd.name, cmd.summary)
	}
	tw.Flush()
	fmt.Fprintf(w, `
Database commands take --database-url URL, or read $%s. URL forms:
  %s
Install Rheo's schema in PostgreSQL and SQLite first with: rheo-migrate up --database-url URL

Output is an aligned table; --output json prints JSON instead.

Exit status:
  0  done
  1  failed: one line on stderr says why and what to do
  2  bad command line: an unknown command or flag, a missing argument, or a
     flag or argument refused as invalid, by rheo or by the database
     (invalid_argument, invalid_partition, invalid_partition_count,
     invalid_replay_opts, confirm_required); nothing was changed

Run "rheo help COMMAND" or "rheo COMMAND -h" for a command's flags.
`, EnvDatabaseURL, strings.ReplaceAll(connect.Forms(), ", ", "\n  "))
}

// runHelp prints the general usage, or one command's help.
func runHelp(args []string, stdout, stderr io.Writer) int {
	switch len(args) {
	case 0:
		writeUsage(stdout)
		return ExitOK
	case 1:
		cmd := findCommand(args[0])
		if cmd == nil {
			fmt.Fprintf(stderr, "rheo help: %s; list the commands with: rheo help\n", unknownCommand(args[0]))
			return ExitUsage
		}
		writeCommandHelp(stdout, cmd)
		return ExitOK
	default:
		fmt.Fprintln(stderr, "rheo help: give at most one command")
		return ExitUsage
	}
}

func usageLine(cmd *command) string {
	return strings.TrimSpace("rheo " + cmd.name + " " + cmd.synopsis)
}

// writeCommandHelp prints a command's usage line, summary, flags and
// details.
func writeCommandHelp(w io.Writer, cmd *command) {
	fmt.Fprintf(w, "Usage: %s\n\n%s\n", usageLine(cmd), cmd.summary)
	fs := newFlagSet(cmd, &call{})
	cmd.define(fs)
	if hasFlags(fs) {
		fmt.Fprint(w, "\nFlags:\n")
		fs.SetOutput(w)
		fs.PrintDefaults()
	}
	if cmd.details != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(cmd.details))
	}
}

func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// unknownCommand says that name is no command, suggesting the nearest
// ones when a typo is likely.
func unknownCommand(name string) string {
	msg := fmt.Sprintf("unknown command %q", name)
	if near := nearestCommands(name); len(near) > 0 {
		msg += " (did you mean " + strings.Join(near, " or ") + "?)"
	}
	return msg
}

// nearestCommands returns the commands that name begins (when it has
// three letters or more and begins at most three), else the commands
// nearest to name by edit distance (insertions, deletions, substitutions
// and swaps of adjacent letters) when they are near enough to be a typo:
// at most one edit for names of up to three letters, two up to seven,
// three beyond.
func nearestCommands(name string) []string {
	limit := 1 + min(len(name)/4, 2)
	var near, prefixed []string
	best := limit + 1
	for _, cmd := range commands() {
		if len(name) >= 3 && strings.HasPrefix(cmd.name, name) {
			prefixed = append(prefixed, cmd.name)
		}
		switch d := editDistance(name, cmd.name); {
		case d < best:
			best, near = d, []string{cmd.name}
		case d == best:
			near = append(near, cmd.name)
		}
	}
	if len(prefixed) > 0 && len(prefixed) <= 3 {
		return prefixed
	}
	return near
}

// editDistance is the optimal string alignment distance between a and b:
// the least insertions, deletions, substitutions and transpositions of
// adjacent bytes that turn a into b.
func editDistance(a, b string) int {
	// d[i][j] is the distance between a[:i] and b[:j].
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
