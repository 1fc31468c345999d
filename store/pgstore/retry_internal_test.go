package pgstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/store"
)

// unsent is an error that, like pgconn's own, says it happened before
// anything was sent.
type unsent struct{}

func (unsent) Error() string     { return "write failed before sending" }
func (unsent) SafeToRetry() bool { return true }

// One place decides what a failure means for a retry; each kind of failure
// gets the answer the contract needs.
func TestRetryableAndMayHaveAppliedClassifyEveryFailure(t *testing.T) {
	t.Parallel()
	pg := func(code string) error { return fmt.Errorf("query: %w", &pgconn.PgError{Code: code}) }
	for _, tc := range []struct {
		name                 string
		err                  error
		ifNotApplied, always bool
		mayHaveApplied       bool
	}{
		{"caller cancelled", fmt.Errorf("x: %w", context.Canceled), false, false, false},
		{"caller's deadline", fmt.Errorf("x: %w", context.DeadlineExceeded), false, false, false},
		{"failed before sending", unsent{}, true, true, false},
		{"no connection could be opened", &acquireError{err: errors.New("connection refused")}, true, true, false},
		{"serialization failure", pg("40001"), true, true, false},
		{"deadlock", pg("40P01"), true, true, false},
		{"backend terminated", pg("57P01"), true, true, false},
		{"server starting", pg("57P03"), true, true, false},
		{"connection failure reported by the server", pg("08006"), true, true, false},
		{"read-only session (a demoted primary)", pg("25006"), true, true, false},
		{"statement not supported (Citus)", pg("0A000"), false, false, false},
		{"unique violation", pg("23505"), false, false, false},
		{"check violation", pg("23514"), false, false, false},
		{"no row", pgx.ErrNoRows, false, false, false},
		{"connection lost mid-statement", fmt.Errorf("receive: %w", io.ErrUnexpectedEOF), false, true, true},
		{"pool exhausted", &store.UnavailableError{Op: "get", Err: fmt.Errorf("%w: %w", ErrPoolExhausted, context.DeadlineExceeded)}, false, false, false},
	} {
		require.Equal(t, tc.ifNotApplied, retryable(tc.err, rerunIfNotApplied), "%s: retryable if not applied", tc.name)
		require.Equal(t, tc.always, retryable(tc.err, rerunAlways), "%s: retryable always", tc.name)
		require.Equal(t, tc.mayHaveApplied, mayHaveApplied(tc.err), "%s: may have applied", tc.name)
	}
}

// A connection that answered a read-only session's error or a refused
// statement serves no other; every other failure leaves it to the pool.
func TestOnlyReadOnlyAndUnsupportedErrorsDropTheConnection(t *testing.T) {
	t.Parallel()
	pg := func(code string) error { return fmt.Errorf("query: %w", &pgconn.PgError{Code: code}) }
	require.True(t, dropsConnection(pg("25006")))
	require.True(t, dropsConnection(pg("0A000")))
	for _, err := range []error{nil, pg("40001"), pg("23505"), pg("08006"), io.ErrUnexpectedEOF, context.Canceled} {
		require.False(t, dropsConnection(err), "%v", err)
	}
}
