package migrate

import "testing"

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
