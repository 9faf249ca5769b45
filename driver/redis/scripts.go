package redis

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver/driverutil"
)

//go:embed lua/*.lua
var luaFiles embed.FS

// script is one operation's Lua script: lua/lib.lua followed by
// lua/<name>.lua, run with EVALSHA (EVAL the first time a server lacks
// it). writes tells whether a lost answer leaves the outcome unknown.
type script struct {
	name   string
	writes bool
	s      *goredis.Script
}

func load(name string, writes bool) *script {
	lib, err := luaFiles.ReadFile("lua/lib.lua")
	if err != nil {
		panic(err)
	}
	body, err := luaFiles.ReadFile("lua/" + name + ".lua")
	if err != nil {
		panic(err)
	}
	return &script{name: name, writes: writes, s: goredis.NewScript(string(lib) + "\n" + string(body))}
}

var (
	scriptCreateStream = load("create_stream", true)
	scriptCreateGroup  = load("create_group", true)
	scriptAppend       = load("append", true)
	scriptRead         = load("read", false)
	scriptFetch        = load("fetch", true)
	scriptRenew        = load("renew", true)
	scriptAck          = load("ack", true)
	scriptRetry        = load("retry", true)
	scriptReject       = load("reject", true)
	scriptReplay       = load("replay", true)
	scriptReset        = load("reset_group", true)
	scriptLag          = load("lag", false)
	scriptGroupInfo    = load("group_info", false)
	scriptLeases       = load("leases", false)
	scriptDeadLetters  = load("dead_letters", false)
	scriptListGroups   = load("list_groups", false)
	scriptStreamInfo   = load("stream_info", false)
	scriptRetention    = load("set_retention", true)
	scriptOrdering     = load("set_ordering", true)
	scriptDropGroup    = load("drop_group", true)
	scriptDropStream   = load("drop_stream", true)
	scriptPrune        = load("prune", true)
)

// Keys that are not a stream's: the stream list and the numbers that
// lease ids carry, all in one slot of their own.
const (
	keyStreams    = "rheo:{rheo}:streams"
	keyStreamNums = "rheo:{rheo}:sids"
	keyNextNum    = "rheo:{rheo}:next"
)

// registerScript gives a new stream its number and lists it, on the
// global slot. The stream exists once create_stream has written its meta
// key; a listed name without one is not shown.
var registerScript = goredis.NewScript(`
local n = redis.call('INCR', KEYS[1])
redis.call('HSET', KEYS[2], n, ARGV[1])
redis.call('ZADD', KEYS[3], 0, ARGV[1])
return n`)

// prefix is the prefix of a stream's keys, its name as the hash tag.
func prefix(stream string) string { return "rheo:{" + stream + "}:" }

// call runs a script on stream's slot. argErr, when not nil, is the
// argument error the script raises after its existence checks (the
// reference's order of checks); args follow the prefix, argErr and now.
func (d *Driver) call(ctx context.Context, sc *script, stream string, argErr error, now timeArg, args ...any) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, ended(sc.name, err)
	}
	p := prefix(stream)
	all := make([]any, 0, len(args)+3)
	all = append(all, p, argWords(argErr), now.enc())
	all = append(all, args...)
	v, err := sc.s.Run(ctx, d.client, []string{p + "meta"}, all...).Result()
	if err != nil {
		return nil, interpretError(sc.name, err, sc.writes)
	}
	return v, nil
}

// argWords renders an argument error for a script: "<word> <detail>".
func argWords(err error) string {
	if err == nil {
		return ""
	}
	var e *rheo.Error
	if !errors.As(err, &e) {
		return "invalid_argument " + err.Error()
	}
	detail := strings.TrimPrefix(err.Error(), e.Reason)
	return e.Reason + " " + strings.TrimPrefix(detail, ": ")
}

// scriptSuffix is what Redis adds to the message of an error a script
// raised.
var scriptSuffix = regexp.MustCompile(` script: [0-9a-f]+, on @user_script:\d+\.$`)

var byReason = map[string]*rheo.Error{}

func init() {
	for _, e := range []*rheo.Error{
		rheo.ErrStreamNotFound, rheo.ErrGroupNotFound, rheo.ErrAlreadyExists, rheo.ErrStaleLease,
		rheo.ErrReceiptMismatch, rheo.ErrInvalidPartitionCount, rheo.ErrInvalidPartition,
		rheo.ErrConfirmRequired, rheo.ErrInvalidReplayOpts, rheo.ErrCursorNotFound,
		rheo.ErrInvalidArgument, rheo.ErrImmutableEvent,
	} {
		byReason[e.Reason] = e
	}
}

// interpretError translates an error of operation op into Rheo's
// vocabulary; it is the only place where Redis errors are looked at. A
// script's own "RHEO <word> <detail>" is the word's sentinel. A
// connection that breaks after a command that writes was sent leaves
// the outcome unknown: ambiguous. One that could not be made, and the
// errors of a server that refused to run the command (loading, a cluster
// without a master for the slot), are backend_unavailable.
func interpretError(op string, err error, writes bool) error {
	if err == nil || rheo.IsVocabulary(err) {
		return err
	}
	var rerr goredis.Error
	if errors.As(err, &rerr) {
		msg := rerr.Error()
		if rest, ok := strings.CutPrefix(msg, "RHEO "); ok {
			word, detail, _ := strings.Cut(rest, " ")
			if s := byReason[word]; s != nil {
				return rheo.Errorf(s, "%s", scriptSuffix.ReplaceAllString(detail, ""))
			}
		}
		for _, code := range []string{"LOADING", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN", "BUSY"} {
			if strings.HasPrefix(msg, code+" ") || msg == code {
				return &rheo.UnavailableError{Op: op, Kind: rheo.KindShuttingDown, Message: msg, Err: err}
			}
		}
		kind := rheo.KindUnknown
		switch {
		case strings.HasPrefix(msg, "READONLY"):
			kind = rheo.KindReadOnly
		case strings.HasPrefix(msg, "OOM"):
			kind = rheo.KindOutOfResources
		case strings.HasPrefix(msg, "NOPERM"), strings.HasPrefix(msg, "NOAUTH"), strings.HasPrefix(msg, "WRONGPASS"):
			kind = rheo.KindPermissionDenied
		}
		return &rheo.FailedError{Op: op, Kind: kind, Message: msg, Err: err}
	}
	if errors.Is(err, goredis.ErrClosed) || errors.Is(err, goredis.ErrPoolTimeout) || dialFailed(err) {
		return &rheo.UnavailableError{Op: op, Kind: rheo.KindConnectionLost, Err: err}
	}
	kind := rheo.KindConnectionLost
	switch {
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		kind = rheo.KindTimeout
	case errors.Is(err, context.Canceled):
		kind = rheo.KindCanceled
	}
	if writes {
		return &rheo.AmbiguousError{Op: op, Err: err}
	}
	return &rheo.UnavailableError{Op: op, Kind: kind, Err: err}
}

// ended is the error of an operation whose context ended before it
// was sent: nothing happened.
func ended(op string, err error) error {
	kind := rheo.KindCanceled
	if errors.Is(err, context.DeadlineExceeded) {
		kind = rheo.KindTimeout
	}
	return &rheo.FailedError{Op: op, Kind: kind, Err: err}
}

// dialFailed reports an error of making a connection: nothing was sent.
func dialFailed(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// timeArg is a time as the scripts compare it: microseconds since
// 0001-01-01T00:00:00Z, 18 decimal digits, so that comparing the strings
// compares the times.
type timeArg struct{ t time.Time }

// noClock is the time sent to the scripts of operations that read no
// clock (on PostgreSQL, those without a clock argument).
var noClock = timeArg{t: driverutil.MinTime}

// minMicros is driverutil.MinTime in Unix microseconds.
var minMicros = driverutil.MinTime.UnixMicro()

func (a timeArg) enc() string { return encTime(a.t) }

// encTime encodes a time in the valid range for the scripts.
func encTime(t time.Time) string {
	return fmt.Sprintf("%018d", t.UnixMicro()-minMicros)
}

// encBound encodes a time that is only compared with event timestamps:
// outside the valid range it is below or above every encoding.
func encBound(t time.Time) string {
	switch driverutil.Infinite(t) {
	case -1:
		return "-"
	case 1:
		return "~"
	}
	return encTime(t)
}

// decTime decodes a time of the scripts.
func decTime(s string) (time.Time, error) {
	us, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("a stored time %q: %w", s, err)
	}
	return time.UnixMicro(us + minMicros).UTC(), nil
}

// checkTime reports a clock or ts outside the valid range.
func checkTime(what string, t time.Time) error { return driverutil.CheckTime(what, t) }
