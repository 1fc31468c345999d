package executor

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/store"
)

// Result.Replayed says the outcome came from the store or from an identical
// call in flight: the executor's to set. A tool, or a Reconciler, that sets
// it on a call that ran must not have that call reported as a replay (the
// runtime shows a replay as "reused cached result" and counts no work).
func TestToolCannotReportARunAsAReplay(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, mode Mode) {
		b := setup(t, &Config{Mode: mode})
		ctx := bounded(t)
		b.tool.behave = func(_ context.Context, c Call) (Result, error) {
			return Result{Output: []byte("sent"), Replayed: true}, nil
		}
		c := call("send_mail", `{"to":"a@example.com"}`)

		res, err := b.exec.Execute(ctx, c)
		require.NoError(t, err)
		require.Equal(t, Result{Output: []byte("sent")}, res, "the tool ran: not a replay")
		again, err := b.exec.Execute(ctx, c)
		require.NoError(t, err)
		require.Equal(t, Result{Output: []byte("sent"), Replayed: true}, again, "the stored outcome is")
		require.EqualValues(t, 1, b.tool.runs.Load())

		// The same through Prepare and Run.
		c = call("send_mail", `{"to":"b@example.com"}`)
		preps, err := b.exec.Prepare(ctx, []Call{c})
		require.NoError(t, err)
		res, err = preps[0].Run(ctx)
		require.NoError(t, err)
		require.False(t, res.Replayed, "the tool ran: not a replay")

		// A failure the tool reports, or an error, is no replay either.
		b.tool.behave = func(context.Context, Call) (Result, error) {
			return Result{Output: []byte("refused"), Failed: true, Replayed: true}, nil
		}
		res, err = b.exec.Execute(ctx, call("send_mail", `{"to":"c@example.com"}`))
		require.NoError(t, err)
		require.Equal(t, Result{Output: []byte("refused"), Failed: true}, res)
		b.tool.behave = func(context.Context, Call) (Result, error) {
			return Result{Output: []byte("half"), Replayed: true}, errors.New("smtp down")
		}
		res, err = b.exec.Execute(ctx, call("send_mail", `{"to":"d@example.com"}`))
		require.Error(t, err)
		require.False(t, res.Replayed)
	})
}

// The one replay a tool may report: in probe-then-store mode, a tool that
// stores its outcome itself (pgstore.TxTool) and finds another caller's
// stored first hands that outcome back, Stored and Replayed set. Under a
// claim nobody else can store, so there it is never a replay.
func TestSelfStoringToolMayReportAReplayOnlyWithoutAClaim(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, mode Mode) {
		b := setup(t, &Config{Mode: mode})
		ctx := bounded(t)
		b.tool.behave = func(ctx context.Context, c Call) (Result, error) {
			info, _ := CallInfoFrom(ctx)
			if info.Claim.Token > 0 {
				_, err := b.st.Complete(ctx, info.Claim, store.Outcome{Kind: store.KindSuccess, Result: []byte("mine")})
				require.NoError(t, err)
				return Result{Output: []byte("mine"), Stored: true, Replayed: true}, nil
			}
			// Another caller stores first; this one's write finds it.
			_, _, err := b.st.Put(ctx, info.Scope, info.Entry(), store.Outcome{Kind: store.KindSuccess, Result: []byte("theirs")}, store.WriteOptions{})
			require.NoError(t, err)
			rec, stored, err := b.st.Put(ctx, info.Scope, info.Entry(), store.Outcome{Kind: store.KindSuccess, Result: []byte("mine")}, store.WriteOptions{})
			require.NoError(t, err)
			require.False(t, stored)
			return Result{Output: rec.Outcome.Result, Stored: true, Replayed: true}, nil
		}
		res, err := b.exec.Execute(ctx, call("insert_order", `{"id":1}`))
		require.NoError(t, err)
		if mode == ModeExclusive {
			require.Equal(t, Result{Output: []byte("mine"), Stored: true}, res)
			return
		}
		require.Equal(t, Result{Output: []byte("theirs"), Stored: true, Replayed: true}, res)
	})
}

// A Reconciler's found result is an outcome found remotely, not a replay of
// a stored one, whether it is found after a takeover or after the tool's
// unknown outcome.
func TestReconcilerCannotReportAReplay(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := bounded(t)
	tool := &reconcilingTool{}
	tool.behave = func(context.Context, Call) (Result, error) {
		return Result{}, fmt.Errorf("send: %w: read timeout", ErrOutcomeUnknown)
	}
	tool.reconcile = func(context.Context, Call) (Result, bool, error) {
		return Result{Output: []byte("sent"), Replayed: true}, true, nil
	}
	exec := b.newExec(t, tool, nil)

	c := call("send_mail", `{"to":"a@example.com"}`)
	crashedHolder(t, b, c)
	res, err := exec.Execute(ctx, c)
	require.NoError(t, err)
	require.Equal(t, Result{Output: []byte("sent")}, res, "reconciled after a takeover")

	res, err = exec.Execute(ctx, call("send_mail", `{"to":"b@example.com"}`))
	require.NoError(t, err)
	require.Equal(t, Result{Output: []byte("sent")}, res, "reconciled after an unknown outcome")
	require.EqualValues(t, 1, tool.runs.Load())
}

// An observer counts a tool's false replay as the run it was.
func TestObserverCountsAToolsFalseReplayAsARun(t *testing.T) {
	t.Parallel()
	b, obs := observed(t, nil)
	b.tool.behave = func(context.Context, Call) (Result, error) {
		return Result{Output: []byte("sent"), Replayed: true}, nil
	}
	_, err := b.exec.Execute(bounded(t), call("send_mail", `{}`))
	require.NoError(t, err)
	ev := obs.only(t)
	require.Equal(t, CallRan, ev.Outcome)
	require.True(t, ev.ToolRan)
}

// A Reconciler finds an outcome remotely, where nobody stored it: a found
// Result with Stored set is stored all the same, so that the next call
// replays it instead of finding the claim pending until its lease ends.
func TestReconciledOutcomeMarkedStoredIsStoredAndReplayed(t *testing.T) {
	t.Parallel()
	for name, unknown := range map[string]bool{"after a takeover": false, "after an unknown outcome": true} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil)
			ctx := bounded(t)
			tool := &reconcilingTool{}
			tool.behave = func(context.Context, Call) (Result, error) {
				return Result{}, fmt.Errorf("send: %w: read timeout", ErrOutcomeUnknown)
			}
			tool.reconcile = func(context.Context, Call) (Result, bool, error) {
				return Result{Output: []byte("sent"), Stored: true}, true, nil
			}
			exec := b.newExec(t, tool, &Config{MaxWait: 20 * time.Millisecond})
			c := call("send_mail", `{"to":"a@example.com"}`)
			if !unknown {
				crashedHolder(t, b, c)
			}

			res, err := exec.Execute(ctx, c)
			require.NoError(t, err)
			require.Equal(t, []byte("sent"), res.Output)
			again, err := exec.Execute(ctx, c)
			require.NoError(t, err, "stored: replayed, not in flight until the lease ends")
			require.Equal(t, Result{Output: []byte("sent"), Replayed: true}, again)
			require.EqualValues(t, 1, tool.reconciles.Load())
		})
	}
}

// A Reconciler that did store what it found, under the call's claim in its
// own transaction, and says so (Stored) is not stored a second time, which
// would fail with a lost lease.
func TestReconcilerThatStoredUnderTheClaimIsNotStoredAgain(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := bounded(t)
	tool := &reconcilingTool{}
	tool.reconcile = func(ctx context.Context, _ Call) (Result, bool, error) {
		info, _ := CallInfoFrom(ctx)
		_, err := b.st.Complete(ctx, info.Claim, store.Outcome{Kind: store.KindSuccess, Result: []byte("sent")})
		require.NoError(t, err)
		return Result{Output: []byte("sent"), Stored: true}, true, nil
	}
	exec := b.newExec(t, tool, nil)
	c := call("send_mail", `{"to":"a@example.com"}`)
	crashedHolder(t, b, c)

	res, err := exec.Execute(ctx, c)
	require.NoError(t, err)
	require.Equal(t, []byte("sent"), res.Output)
	again, err := exec.Execute(ctx, c)
	require.NoError(t, err)
	require.Equal(t, Result{Output: []byte("sent"), Replayed: true}, again)
	require.Zero(t, tool.runs.Load())
}

// ClassOf classes an error by the sentinels it wraps, a tool's own error
// too: a tool that wraps a contract error says what a retry would do,
// although it ran (CallEvent.ToolRan tells). One that wraps none is a
// transient failure.
func TestToolErrorWrappingAContractErrorTakesItsClass(t *testing.T) {
	t.Parallel()
	for want, toolErr := range map[contract.Class]error{
		contract.ClassRetry:          errors.New("smtp down"),
		contract.ClassBadCall:        fmt.Errorf("send: %w", &contract.InputError{Field: "to", Problem: "no such mailbox"}),
		contract.ClassPermanent:      fmt.Errorf("send: %w", contract.ErrRefused),
		contract.ClassOutcomeUnknown: fmt.Errorf("send: %w", ErrOutcomeUnknown),
	} {
		t.Run(want.String(), func(t *testing.T) {
			t.Parallel()
			b, obs := observed(t, nil)
			b.tool.behave = func(context.Context, Call) (Result, error) { return Result{}, toolErr }
			_, err := b.exec.Execute(bounded(t), call("send_mail", `{}`))
			require.ErrorIs(t, err, toolErr)
			require.Equal(t, want, ClassOf(err))
			require.True(t, obs.only(t).ToolRan)
		})
	}
}
