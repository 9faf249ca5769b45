package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/rheo-go/rheo/migrate"
)

// poolConns is the size of every connection pool the harness opens, for
// both systems, so that neither is limited by a smaller pool.
const poolConns = 24

// server is the PostgreSQL server the benchmarks run on. It creates every
// database it hands out from a migrated template of each system, and
// drops them all in close.
type server struct {
	url string // the server URL as given, connected to an administrative database

	mu        sync.Mutex
	databases []string // every database created and not dropped yet
	created   []string // every database created, dropped or not
	templates map[string]string
}

func newServer(ctx context.Context, serverURL string) (*server, error) {
	s := &server{url: serverURL, templates: map[string]string{}}
	conn, err := s.admin(ctx)
	if err != nil {
		return nil, err
	}
	return s, conn.Close(ctx)
}

func (s *server) admin(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.Connect(ctx, s.url)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", redact(s.url), err)
	}
	return conn, nil
}

// databaseURL is the server URL pointed at database name.
func (s *server) databaseURL(name string) string {
	u, err := url.Parse(s.url)
	if err != nil {
		// Checked by newServer's connect, which parses the same URL.
		panic(err)
	}
	u.Path = "/" + name
	return u.String()
}

func randomName(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + "_" + hex.EncodeToString(b)
}

// create makes an empty database (from template when not empty) and
// records it for dropping.
func (s *server) create(ctx context.Context, prefix, template string) (string, error) {
	name := randomName(prefix)
	conn, err := s.admin(ctx)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	sql := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize()
	if template != "" {
		sql += " TEMPLATE " + pgx.Identifier{template}.Sanitize()
	}
	s.mu.Lock()
	s.databases = append(s.databases, name)
	s.created = append(s.created, name)
	s.mu.Unlock()
	if _, err := conn.Exec(ctx, sql); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	return name, nil
}

// createdCount is how many databases create has made so far.
func (s *server) createdCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.created)
}

// drop drops a database created by create.
func (s *server) drop(ctx context.Context, name string) error {
	conn, err := s.admin(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, n := range s.databases {
		if n == name {
			s.databases = append(s.databases[:i], s.databases[i+1:]...)
			break
		}
	}
	return nil
}

// close drops every database still recorded, templates included. It runs
// on a context of its own so that an interrupt cannot skip it.
func (s *server) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s.mu.Lock()
	names := append([]string(nil), s.databases...)
	s.mu.Unlock()
	var firstErr error
	for _, name := range names {
		if err := s.drop(ctx, name); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return firstErr
}

// template returns the migrated template database of a system, creating
// it on first use.
func (s *server) template(ctx context.Context, system string) (string, error) {
	s.mu.Lock()
	name, ok := s.templates[system]
	s.mu.Unlock()
	if ok {
		return name, nil
	}
	name, err := s.create(ctx, "bench_tpl_"+system, "")
	if err != nil {
		return "", err
	}
	conn, err := pgx.Connect(ctx, s.databaseURL(name))
	if err != nil {
		return "", err
	}
	switch system {
	case systemRheo:
		err = migrate.Postgres(ctx, conn, nil)
	case systemRiver:
		err = migrateRiver(ctx, s.databaseURL(name))
	}
	// A template must have no connections when it is copied.
	if cerr := conn.Close(ctx); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("migrate %s template: %w", system, err)
	}
	s.mu.Lock()
	s.templates[system] = name
	s.mu.Unlock()
	return name, nil
}

func migrateRiver(ctx context.Context, dbURL string) error {
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return err
	}
	_, err = migrator.Migrate(ctx, rivermigrate.DirectionUp, nil)
	return err
}

// database is a fresh, migrated database of one system for one
// measurement.
type database struct {
	name string
	url  string
	pool *pgxpool.Pool
}

// fresh clones the system's template into a new database and opens a
// pool on it. release closes the pool and drops the database.
func (s *server) fresh(ctx context.Context, system string) (db *database, release func(), err error) {
	tpl, err := s.template(ctx, system)
	if err != nil {
		return nil, nil, err
	}
	name, err := s.create(ctx, "bench_"+system, tpl)
	if err != nil {
		return nil, nil, err
	}
	dbURL := s.databaseURL(name)
	config, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return nil, nil, err
	}
	config.MaxConns = poolConns
	pool, err := pgxpool.NewWithConfig(ctx, config)
	if err != nil {
		_ = s.drop(context.WithoutCancel(ctx), name)
		return nil, nil, err
	}
	release = func() {
		pool.Close()
		_ = s.drop(context.WithoutCancel(ctx), name)
	}
	return &database{name: name, url: dbURL, pool: pool}, release, nil
}

// settings are the server settings and machine facts printed with every
// run.
type settings struct {
	Version           string
	SharedBuffers     string
	SynchronousCommit string
	Fsync             string
	WALLevel          string
	MaxConnections    string
	AutovacuumNaptime string
	CPUs              int
	GoVersion         string
	// Redis is the Redis server's version and persistence, "" when
	// Rheo on Redis does not run.
	Redis string
}

func (s *server) settings(ctx context.Context) (settings, error) {
	conn, err := s.admin(ctx)
	if err != nil {
		return settings{}, err
	}
	defer conn.Close(ctx)
	st := settings{CPUs: runtime.NumCPU(), GoVersion: runtime.Version()}
	err = conn.QueryRow(ctx, `SELECT current_setting('server_version'), current_setting('shared_buffers'),
		current_setting('synchronous_commit'), current_setting('fsync'), current_setting('wal_level'),
		current_setting('max_connections'), current_setting('autovacuum_naptime')`).
		Scan(&st.Version, &st.SharedBuffers, &st.SynchronousCommit, &st.Fsync, &st.WALLevel,
			&st.MaxConnections, &st.AutovacuumNaptime)
	return st, err
}

// loadAverage reads the 1, 5 and 15 minute load averages, or "unknown".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// loadSamples collects the 1-minute load average over a run.
type loadSamples struct {
	min, max float64
	n        int
}

// sample reads the 1-minute load average now.
func (l *loadSamples) sample() {
	f := strings.Fields(loadAverage())
	if len(f) == 0 {
		return
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return
	}
	if l.n == 0 || v < l.min {
		l.min = v
	}
	if l.n == 0 || v > l.max {
		l.max = v
	}
	l.n++
}

// String is "min – max", or "unknown" without samples.
func (l *loadSamples) String() string {
	if l.n == 0 {
		return "unknown"
	}
	return fmt.Sprintf("%.2f – %.2f", l.min, l.max)
}

// redact hides a password in a URL for messages.
func redact(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}
