package migrate

import (
	"strings"
	"testing"
)

func TestDollarQuote(t *testing.T) {
	tests := []struct {
		name string
		body string
		want string
	}{
		{"plain text keeps the tag", "SELECT 1;", "$q$\nSELECT 1;\n$q$"},
		{"other dollar quotes are left alone", "AS $$ SELECT 1 $$;", "$q$\nAS $$ SELECT 1 $$;\n$q$"},
		{"a body holding the tag gets another one", "AS $q$ x $q$;", "$q_1$\nAS $q$ x $q$;\n$q_1$"},
		{"a body holding both tags gets a third", "$q$ $q_1$", "$q_2$\n$q$ $q_1$\n$q_2$"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := dollarQuote(tt.body, "q"); got != tt.want {
				t.Fatalf("dollarQuote(%q) = %q, want %q", tt.body, got, tt.want)
			}
		})
	}
}

func TestParseSteps(t *testing.T) {
	steps, err := parseSteps(`-- the first step
CREATE TABLE a ();

-- the second step's comment
-- rheo:step concurrently
CREATE INDEX CONCURRENTLY b ON a ((1));
-- rheo:step
-- only a comment
-- rheo:step batch
SELECT n FROM f() AS n WHERE n > 0;
`)
	if err != nil {
		t.Fatal(err)
	}
	want := []step{
		{stepTx, "-- the first step\nCREATE TABLE a ();"},
		{stepConcurrently, "-- the second step's comment\nCREATE INDEX CONCURRENTLY b ON a ((1));"},
		{stepBatch, "-- only a comment\nSELECT n FROM f() AS n WHERE n > 0;"},
	}
	if len(steps) != len(want) {
		t.Fatalf("steps %q, want %q", steps, want)
	}
	for i := range want {
		if steps[i] != want[i] {
			t.Errorf("step %d = %q, want %q", i, steps[i], want[i])
		}
	}
	if _, err := parseSteps("-- rheo:step sometimes\nSELECT 1;"); err == nil {
		t.Error("an unknown kind of step was accepted")
	}
}

func TestHandOverRelations(t *testing.T) {
	if handOverRelationsSQL == handOverSQL || strings.Contains(handOverRelationsSQL, "ROUTINE") {
		t.Fatalf("handOverRelationsSQL still hands the routines over:\n%s", handOverRelationsSQL)
	}
}
