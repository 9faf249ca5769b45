// Package faultproxy is a TCP proxy for tests that stands between a
// PostgreSQL client and the server and breaks the connection on a chosen
// statement, so that a test can tell exactly what the server saw when the
// client lost its answer.
//
// The proxy reads the frontend protocol the client sends and groups its
// messages into requests: a simple Query, or the extended-protocol
// messages up to a Sync. A request is held back until it is complete,
// then checked against the armed faults: the first fault that matches a
// statement the request executes (the text of a Query, or of the
// statement an Execute runs, which the proxy remembers from its Parse
// even when a later Bind names it only) fires, once. A request that only
// prepares a statement executes nothing and passes.
//
//   - BlackHole: the request is not forwarded, and the connection goes
//     silent in both directions while staying open, as behind a dead
//     route: the client waits for an answer until its own deadline. The
//     connection is closed only when the client closes it or sends
//     Terminate (once it has given the connection up, so that it need
//     not wait for the close).
//   - CutAfterSend: the request goes upstream and the server runs it to
//     its end (ReadyForQuery); the answer is dropped and both sides of
//     the connection are closed. The client loses its connection after
//     its bytes went upstream and before the answer came back, and by
//     the time it notices, the server has finished: a write that commits
//     on its own has committed, and a transaction left open is rolled
//     back when the server sees the connection close.
//
// Every other request passes. Requests ending in a Flush rather than a
// Sync pass unchecked (the Rheo driver never sends them). The proxy
// answers SSL and GSS encryption requests itself with "no", so that a
// client with sslmode=prefer falls back to plain TCP and its messages
// can be read; connect with sslmode=disable or prefer.
//
// CutAll closes every connection and refuses new ones until Restore, for
// tests of a database that goes away for a while.
package faultproxy

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// Fault is what happens to a request that triggers it.
type Fault int

const (
	// BlackHole swallows the request and leaves the connection open and
	// silent.
	BlackHole Fault = iota + 1
	// CutAfterSend forwards the request, lets the server finish it, drops
	// the answer and closes the connection.
	CutAfterSend
)

func (f Fault) String() string {
	switch f {
	case BlackHole:
		return "black hole"
	case CutAfterSend:
		return "cut after send"
	}
	return fmt.Sprintf("Fault(%d)", int(f))
}

// Match tells whether a statement, as the client sent it, triggers a
// fault.
type Match func(statement string) bool

// Contains matches the statements that contain text, case included:
// Contains("rheo.ack(") matches rheo.ack and not rheo.ack_batch.
func Contains(text string) Match {
	return func(statement string) bool { return strings.Contains(statement, text) }
}

// Statement matches the statement sql exactly, but for case and the
// space around it: Statement("commit") matches pgx's COMMIT and not a
// statement that mentions synchronous_commit.
func Statement(sql string) Match {
	sql = strings.TrimSpace(sql)
	return func(statement string) bool { return strings.EqualFold(strings.TrimSpace(statement), sql) }
}

// Trigger is an armed fault.
type Trigger struct {
	fault Fault
	match Match
	fired chan struct{}
	once  sync.Once
}

func (t *Trigger) fire() { t.once.Do(func() { close(t.fired) }) }

// Fired is closed once the fault has struck: for BlackHole when the
// request was swallowed, for CutAfterSend when the server has answered
// and the client's connection is closed.
func (t *Trigger) Fired() <-chan struct{} { return t.fired }

// Proxy forwards TCP connections to a PostgreSQL server. It is safe for
// concurrent use.
type Proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	armed []*Trigger
	cut   bool
	conns map[*conn]bool
	wg    sync.WaitGroup
}

// New starts a proxy on 127.0.0.1 (a free port) to target (host:port). It
// is closed, with every connection through it, when t ends.
func New(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err, "faultproxy: listen")
	p := &Proxy{ln: ln, target: target, conns: map[*conn]bool{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// URL returns the PostgreSQL URL dsn pointed at the proxy.
func (p *Proxy) URL(t testing.TB, dsn string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	require.NoErrorf(t, err, "faultproxy: parse %q", dsn)
	u.Host = p.Addr()
	return u.String()
}

// Arm makes the next request, on any connection, that executes a
// statement match accepts suffer fault. Of the faults armed at a time,
// the first armed that matches fires, one per request.
func (p *Proxy) Arm(fault Fault, match Match) *Trigger {
	t := &Trigger{fault: fault, match: match, fired: make(chan struct{})}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = append(p.armed, t)
	return t
}

// Disarm removes the faults that have not fired yet.
func (p *Proxy) Disarm() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = nil
}

// CutAll closes every connection and refuses new ones until Restore.
func (p *Proxy) CutAll() {
	p.mu.Lock()
	p.cut = true
	conns := make([]*conn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
}

// Restore accepts connections again after CutAll.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

func (p *Proxy) close() {
	_ = p.ln.Close()
	p.CutAll()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			_ = client.Close()
			continue
		}
		p.mu.Unlock()
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = client.Close()
			continue
		}
		c := &conn{p: p, client: client, server: server, statements: map[string]string{}, portals: map[string]string{}}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			c.close()
			continue
		}
		p.conns[c] = true
		p.wg.Add(1)
		p.mu.Unlock()
		go c.run()
	}
}

// match removes and returns the first armed trigger that matches one of
// the statements.
func (p *Proxy) match(statements []string) *Trigger {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, t := range p.armed {
		for _, s := range statements {
			if t.match(s) {
				p.armed = append(p.armed[:i:i], p.armed[i+1:]...)
				return t
			}
		}
	}
	return nil
}

// The states of a connection.
const (
	passing  = iota
	silent   // black-holed: nothing is forwarded either way
	swallow  // cut after send: the answer is dropped up to ReadyForQuery
	finished // closed
)

// conn is one client connection and its upstream.
type conn struct {
	p              *Proxy
	client, server net.Conn

	mu    sync.Mutex
	state int
	cut   *Trigger // the CutAfterSend waiting for its ReadyForQuery

	closeOnce sync.Once

	// Read by the client goroutine only: prepared statements and portals
	// by name, with their statement text.
	statements map[string]string
	portals    map[string]string
}

func (c *conn) setState(s int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.state = s
}

func (c *conn) getState() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state
}

func (c *conn) close() {
	c.closeOnce.Do(func() {
		c.setState(finished)
		_ = c.client.Close()
		_ = c.server.Close()
		c.p.mu.Lock()
		delete(c.p.conns, c)
		c.p.mu.Unlock()
	})
}

// The codes of the untyped messages a client may open with.
const (
	sslRequest    = 80877103
	gssEncRequest = 80877104
	cancelRequest = 80877102
)

func (c *conn) run() {
	defer c.p.wg.Done()
	defer c.close()
	in := bufio.NewReader(c.client)

	// The startup phase: untyped messages. Encryption requests are
	// refused here, so that what follows stays readable.
	for {
		msg, err := readUntyped(in)
		if err != nil {
			return
		}
		code := binary.BigEndian.Uint32(msg[4:8])
		if code == sslRequest || code == gssEncRequest {
			if _, err := c.client.Write([]byte{'N'}); err != nil {
				return
			}
			continue
		}
		if _, err := c.server.Write(msg); err != nil {
			return
		}
		if code == cancelRequest {
			// No messages follow; the server closes the connection.
			_, _ = io.Copy(io.Discard, c.server)
			return
		}
		break
	}

	done := make(chan struct{})
	go func() {
		defer close(done)
		c.serverToClient()
	}()
	c.clientToServer(in)
	// Once the client side ends, the server side ends too, unless an
	// answer is being swallowed: the cut closes both when it is complete.
	if c.getState() != swallow {
		c.close()
	}
	<-done
}

// clientToServer forwards the client's messages, a request at a time.
func (c *conn) clientToServer(in *bufio.Reader) {
	var (
		pending  []byte   // the request so far, held back
		executed []string // the statements it executes
	)
	for {
		typ, msg, err := readTyped(in)
		if err != nil {
			return
		}
		switch c.getState() {
		case silent:
			if typ == 'X' {
				// The client gives the connection up (Terminate): end it,
				// rather than leave the client draining it until its own
				// deadline.
				return
			}
			continue // the client's bytes go nowhere
		case swallow:
			continue
		case finished:
			return
		}
		body := msg[5:]
		switch typ {
		case 'P': // Parse: statement name, query text, …
			name, rest := cstring(body)
			query, _ := cstring(rest)
			c.statements[name] = query
		case 'B': // Bind: portal name, statement name, …
			portal, rest := cstring(body)
			stmt, _ := cstring(rest)
			c.portals[portal] = c.statements[stmt]
		case 'E': // Execute: portal name, …
			portal, _ := cstring(body)
			executed = append(executed, c.portals[portal])
		case 'Q': // Query: the text
			query, _ := cstring(body)
			executed = append(executed, query)
		}
		pending = append(pending, msg...)
		switch typ {
		case 'P', 'B', 'E', 'D', 'C':
			// Part of an extended-protocol request: wait for its end.
			continue
		case 'S', 'Q':
			if !c.endRequest(pending, executed) {
				return
			}
		default:
			// Flush, authentication, Terminate, COPY data, …: on its way.
			if _, err := c.server.Write(pending); err != nil {
				return
			}
		}
		pending, executed = pending[:0], executed[:0]
	}
}

// endRequest forwards a complete request, or lets it trigger a fault. It
// reports whether the connection still forwards.
func (c *conn) endRequest(request []byte, executed []string) bool {
	t := c.p.match(executed)
	if t == nil {
		_, err := c.server.Write(request)
		return err == nil
	}
	switch t.fault {
	case BlackHole:
		c.setState(silent)
		t.fire()
		return true
	case CutAfterSend:
		c.mu.Lock()
		c.state, c.cut = swallow, t
		c.mu.Unlock()
		if _, err := c.server.Write(request); err != nil {
			// The server is gone already: the cut is complete.
			c.close()
			t.fire()
			return false
		}
		return true
	}
	panic(fmt.Sprintf("faultproxy: unknown fault %d", t.fault))
}

// serverToClient forwards the server's messages, dropping them while the
// connection is silent or an answer is swallowed.
func (c *conn) serverToClient() {
	in := bufio.NewReader(c.server)
	out := bufio.NewWriter(c.client)
	for {
		typ, msg, err := readTyped(in)
		if err != nil {
			c.mu.Lock()
			t := c.cut
			c.cut = nil
			c.mu.Unlock()
			c.close()
			if t != nil {
				t.fire()
			}
			return
		}
		c.mu.Lock()
		state, t := c.state, c.cut
		if state == swallow && typ == 'Z' {
			c.cut = nil
		}
		c.mu.Unlock()
		switch state {
		case passing:
			if _, err := out.Write(msg); err != nil {
				return
			}
			if in.Buffered() == 0 {
				if err := out.Flush(); err != nil {
					return
				}
			}
		case swallow:
			if typ == 'Z' {
				// The server has finished the request.
				c.close()
				t.fire()
				return
			}
		case finished:
			return
		}
	}
}

// readUntyped reads a startup-phase message: a length, then the rest.
func readUntyped(r *bufio.Reader) ([]byte, error) {
	head := make([]byte, 4)
	if _, err := io.ReadFull(r, head); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(head)
	if n < 8 || n > 1<<20 {
		return nil, errors.New("faultproxy: bad startup message length")
	}
	msg := make([]byte, n)
	copy(msg, head)
	_, err := io.ReadFull(r, msg[4:])
	return msg, err
}

// readTyped reads a message of the main phase: a type byte, a length
// that counts itself, then the body. It returns the whole message.
func readTyped(r *bufio.Reader) (byte, []byte, error) {
	head := make([]byte, 5)
	if _, err := io.ReadFull(r, head); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(head[1:])
	if n < 4 {
		return 0, nil, errors.New("faultproxy: bad message length")
	}
	msg := make([]byte, 1+n)
	copy(msg, head)
	_, err := io.ReadFull(r, msg[5:])
	return head[0], msg, err
}

// cstring splits a NUL-terminated string off b.
func cstring(b []byte) (string, []byte) {
	for i, x := range b {
		if x == 0 {
			return string(b[:i]), b[i+1:]
		}
	}
	return string(b), nil
}
