package pgha

import (
	"errors"
	"fmt"
)

// ErrSynchronous is returned by HoldReplication on a formation whose
// replication is synchronous: with the primary's WAL sender held, every
// commit on the primary would wait for the standby forever. Call SetSynchronous(false)
// first.
var ErrSynchronous = errors.New("pgha: replication is synchronous; holding it back would block every commit (SetSynchronous(false) first)")

// ErrHoldDone is returned by a Hold's methods once it was released or used
// for a failover: a hold ends once.
var ErrHoldDone = errors.New("pgha: the replication hold has ended already")

// OptionError says which field of Options is wrong and why.
type OptionError struct {
	Field  string
	Reason string
}

func (e *OptionError) Error() string {
	return fmt.Sprintf("pgha: option %s: %s", e.Field, e.Reason)
}

// MethodError is returned by Failover for a Method it does not know.
type MethodError struct{ Method Method }

func (e *MethodError) Error() string {
	return fmt.Sprintf("pgha: unknown failover method %d", int(e.Method))
}

// WaitError says what a wait was for, the formation's last state as the
// monitor saw it, and why the wait ended (usually the context's deadline).
type WaitError struct {
	What string
	Last []NodeState
	Err  error
}

func (e *WaitError) Error() string {
	return fmt.Sprintf("pgha: waiting for %s: %v (last seen: %v)", e.What, e.Err, e.Last)
}

func (e *WaitError) Unwrap() error { return e.Err }

// noDockerError says that no Docker engine answered; New skips the test on
// it (outside CI) rather than fail.
type noDockerError struct{ err error }

func (e *noDockerError) Error() string { return "no Docker engine: " + e.err.Error() }

func (e *noDockerError) Unwrap() error { return e.err }
