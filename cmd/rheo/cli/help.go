package cli

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/rheo-go/rheo/internal/dburl"
)

// writeUsage prints the list of commands.
func writeUsage(w io.Writer) {
	fmt.Fprint(w, `rheo: durable consumer groups over an immutable event log in PostgreSQL or SQLite

Usage: rheo COMMAND [arguments] [flags]

Commands:
`)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, cmd := range commands() {
		fmt.Fprintf(tw, "  %s\t%s\n", cmd.name, cmd.summary)
	}
	tw.Flush()
	fmt.Fprintf(w, `
Database commands take --database-url URL, or read $%s. URL forms:
  %s
Install Rheo's schema first with: rheo-migrate up --database-url URL

Output is an aligned table; --output json prints JSON instead.
Exit status: 0 done, 1 failed (one line on stderr says why), 2 bad command line.

Run "rheo help COMMAND" or "rheo COMMAND -h" for a command's flags.
`, EnvDatabaseURL, strings.ReplaceAll(dburl.Forms, ", ", "\n  "))
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
			fmt.Fprintf(stderr, "rheo help: unknown command %q; list the commands with: rheo help\n", args[0])
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
