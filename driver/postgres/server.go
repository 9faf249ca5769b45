package postgres

import (
	"net"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/rheo-go/rheo"
)

// Server is what a connection string names: the server, the user and the
// database, with pgx's defaults and PG* environment variables applied,
// for messages about a connection.
type Server struct {
	// Host is the host name or address, or the Unix socket directory.
	Host string
	// Port is the TCP port.
	Port uint16
	// User is the user name.
	User string
	// Database is the database name.
	Database string
}

// Addr is the server's address: host:port, or the socket directory.
func (s Server) Addr() string {
	if strings.HasPrefix(s.Host, "/") {
		return s.Host
	}
	return net.JoinHostPort(s.Host, strconv.Itoa(int(s.Port)))
}

// ParseServer returns the server that the connection string url names.
// Errors are invalid_argument, as Open's.
func ParseServer(url string) (Server, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return Server{}, rheo.Errorf(rheo.ErrInvalidArgument, "database url: %v", err)
	}
	return Server{Host: cfg.Host, Port: cfg.Port, User: cfg.User, Database: cfg.Database}, nil
}
