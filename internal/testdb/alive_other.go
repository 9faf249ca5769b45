//go:build !unix

package testdb

// Alive reports whether the process pid may exist on this host: where
// that cannot be asked, always, so that no template is taken for an
// orphan.
func Alive(int) bool { return true }
