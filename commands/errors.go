package commands

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redlock-proxy/redlock-proxy/redlock"
	"github.com/redlock-proxy/redlock-proxy/redlock/lease"
	"github.com/redlock-proxy/redlock-proxy/redlock/migrate"
)

// Wire error texts. Where Redis 7 has the same error, the text is Redis's,
// letter for letter: clients and their tests match on it.
const (
	errSyntax        = Error("ERR syntax error")
	errNotInteger    = Error("ERR value is not an integer or out of range")
	errCountRange    = Error("ERR value is out of range, must be positive")
	errNoAuth        = Error("NOAUTH Authentication required.")
	errWrongPass     = Error("WRONGPASS invalid username-password pair or user is disabled.")
	errAuthNoPass    = Error("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?")
	errHelloNoAuth   = Error("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time")
	errNoProto       = Error("NOPROTO unsupported protocol version")
	errProtoNotInt   = Error("ERR Protocol version is not an integer or out of range")
	errDBRange       = Error("ERR DB index is out of range")
	errClusterOff    = Error("ERR This instance has cluster support disabled")
	errClientName    = Error("ERR Client names cannot contain spaces, newlines or special characters.")
	errInternal      = Error("ERR internal error")
	errShuttingDown  = Error("ERR server is shutting down")
	errCancelled     = Error("ERR request cancelled")
	errUnblocked     = Error("UNBLOCKED client unblocked via CLIENT UNBLOCK")
	errReservedKey   = Error("ERR keys starting with '" + redlock.ReservedPrefix + "' are reserved by redlock-proxy (fence counters, proxy membership)")
	errReservedChan  = Error("ERR channels starting with '" + redlock.ReservedPrefix + "' are reserved by redlock-proxy (release notices)")
	errKeyTooLong    = "ERR key is too long (max %d bytes)"
	errValueTooLong  = "ERR value is too long (max %d bytes)"
	errTTLRange      = "ERR ttl %d is out of range: must be between %d and %d ms"
	errWrongArity    = "ERR wrong number of arguments for '%s' command"
	errUnknownSubcmd = "ERR unknown subcommand '%s'. Try %s HELP."
	errNotSupported  = "ERR %s is not supported by redlock-proxy"
	errNoPermCmd     = "NOPERM User %s has no permissions to run the '%s' command"
	errNoPermKey     = Error("NOPERM No permissions to access a key")
	errWrongType     = Error("WRONGTYPE Operation against a key holding the wrong kind of value")
	// errDisagree: a quorum of backends answered a vote, but no quorum of
	// them gave the same reply (distinct from too few answering).
	errDisagree = "NOQUORUM backends disagree: %d of %d agree, need %d"
)

// Errorf builds an error reply from a format.
func Errorf(format string, args ...any) Error {
	return Error(fmt.Sprintf(format, args...))
}

// unknownCommand renders Redis 7's reply to a command it does not know:
// ERR unknown command 'x', with args beginning with: 'a' 'b'
func unknownCommand(args [][]byte) Error {
	var sb strings.Builder
	sb.WriteString("ERR unknown command '" + truncate(args[0], 128) + "', with args beginning with: ")
	n := 0
	for _, a := range args[1:] {
		if n >= 128 {
			break
		}
		s := truncate(a, 128-n)
		sb.WriteString("'" + s + "' ")
		n += len(s) + 3
	}
	return Error(sb.String())
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		b = b[:n]
	}
	return string(b)
}

// lockError maps an error from redlock to the reply a client sees, a
// -NOQUORUM one marked so (noQuorum). Node errors are never sent: they
// are logged by redlock where they happen.
func (d *Dispatcher) lockError(err error) Reply {
	var qe *redlock.QuorumError
	var me *migrate.Error
	var st *redlock.ScriptTimeoutError
	switch {
	case errors.As(err, &st):
		return Error("ERR " + st.Error())
	case errors.Is(err, redlock.ErrNoQuorum) && errors.As(err, &me):
		return noQuorum(Errorf("NOQUORUM migrate_from %s unreachable (a client that has not moved may hold the key there)", me.Addr))
	case errors.Is(err, migrate.ErrDiffers) && errors.As(err, &me):
		return Errorf("ERR migrate_from %s answered the script otherwise than the backends (a client that has not moved may hold its keys there)", me.Addr)
	case errors.Is(err, redlock.ErrNoQuorum) && errors.As(err, &qe):
		if quorumWrongType(qe) {
			return errWrongType
		}
		if errors.Is(err, redlock.ErrDisagree) {
			return noQuorum(Errorf(errDisagree, qe.Granted, qe.Nodes, qe.Quorum))
		}
		notVoting := 0
		for _, e := range qe.Errs {
			if errors.Is(e, redlock.ErrNotVoting) {
				notVoting++
			}
		}
		if notVoting > 0 {
			return noQuorum(Errorf("NOQUORUM only %d of %d backends answered, need %d (%d not voting: quarantined, down or loading; see INFO backends)", qe.Answered, qe.Nodes, qe.Quorum, notVoting))
		}
		return noQuorum(Errorf("NOQUORUM only %d of %d backends answered, need %d", qe.Answered, qe.Nodes, qe.Quorum))
	case errors.Is(err, redlock.ErrNoQuorum):
		return noQuorum("NOQUORUM not enough backends answered")
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return errCancelled
	case errors.Is(err, redlock.ErrOrderBusy):
		return Error("TRYAGAIN " + err.Error())
	case errors.Is(err, lease.ErrMaxHolds):
		return withOutcome(Error("ERR "+err.Error()+" (max_holds)"), ResultError)
	case errors.Is(err, lease.ErrLockTTL):
		return Error("ERR " + err.Error())
	case errors.Is(err, redlock.ErrInvalid):
		// An empty key or value, which one Redis takes: say so, not
		// "syntax error".
		return Error("ERR " + err.Error() + ": redlock-proxy's locks and plain writes need a key and a value that are not empty")
	}
	d.log.Error("unexpected lock error", "error", err)
	return errInternal
}

// quorumWrongType reports whether a quorum of backends answered an
// operation with WRONGTYPE: a compare script (a release, a compare-and-set)
// sent for a key that holds another type than string, which one Redis
// refuses the same way.
func quorumWrongType(qe *redlock.QuorumError) bool {
	n := 0
	for _, e := range qe.Errs {
		var re interface {
			error
			RedisError()
		}
		if errors.As(e, &re) && strings.HasPrefix(re.Error(), "WRONGTYPE") {
			n++
		}
	}
	return n >= qe.Quorum
}
