package dburl

import (
	"net/url"
	"strings"
	"testing"
)

func TestRedactedListenURL(t *testing.T) {
	for _, listen := range []string{
		"postgres://app:listen-secret@db:5432/app",
		"host=db user=app password=listen-secret",
	} {
		target, err := Parse("postgres://app:secret@pooler:6432/app?" + listenURLParam + "=" + url.QueryEscape(listen))
		if err != nil {
			t.Fatal(err)
		}
		got := target.Redacted()
		if strings.Contains(got, "secret") || !strings.Contains(got, "pooler:6432") || !strings.Contains(got, listenURLParam) {
			t.Fatalf("Redacted() = %q, want the URL without either password", got)
		}
	}
}
