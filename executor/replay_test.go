package executor

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/store"
)

func TestSecondIdenticalCallIsReplayedNotRun(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, mode Mode) {
		b := setup(t, &Config{Mode: mode})
		ctx := context.Background()

		first, err := b.exec.Execute(ctx, call("send_mail", `{"to":"a@example.com","n":1}`))
		require.NoError(t, err)
		require.False(t, first.Replayed)

		// The same call spelled differently (key order, white space, number
		// spelling) is the same call.
		second, err := b.exec.Execute(ctx, call("send_mail", ` { "n" : 1.0, "to":"a@example.com" } `))
		require.NoError(t, err)
		require.True(t, second.Replayed)
		require.Equal(t, first.Output, second.Output)
		require.EqualValues(t, 1, b.tool.runs.Load())

		// Another argument is another call.
		_, err = b.exec.Execute(ctx, call("send_mail", `{"to":"b@example.com","n":1}`))
		require.NoError(t, err)
		require.EqualValues(t, 2, b.tool.runs.Load())
	})
}

func TestReplayIsByteIdenticalAndMarkedReplayed(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, mode Mode) {
		b := setup(t, &Config{Mode: mode})
		ctx := context.Background()
		// Not JSON, not UTF-8, a NUL, trailing white space: stored as bytes.
		out := []byte("\xff\x00 {\"b\":1, \"a\":2}\n\t ")
		b.tool.behave = func(context.Context, Call) (Result, error) {
			return Result{Output: append([]byte(nil), out...)}, nil
		}
		c := call("lookup", `{"q":"x"}`)

		first, err := b.exec.Execute(ctx, c)
		require.NoError(t, err)
		require.Equal(t, out, first.Output)
		require.False(t, first.Replayed)

		for range 3 {
			again, err := b.exec.Execute(ctx, c)
			require.NoError(t, err)
			require.Equal(t, Result{Output: out, Replayed: true}, again)
		}
		preps, err := b.exec.Prepare(ctx, []Call{c})
		require.NoError(t, err)
		require.True(t, preps[0].Replayed)
		require.Equal(t, Result{Output: out, Replayed: true}, preps[0].Result)
		require.EqualValues(t, 1, b.tool.runs.Load())
	})
}

func TestFailuresAreNotStoredByDefault(t *testing.T) {
	t.Parallel()
	failures := map[string]func(context.Context, Call) (Result, error){
		"error":         func(context.Context, Call) (Result, error) { return Result{}, errors.New("timeout") },
		"failed result": func(context.Context, Call) (Result, error) { return Result{Output: []byte("no"), Failed: true}, nil },
		"permanent failure": func(context.Context, Call) (Result, error) {
			return Result{Output: []byte("refused"), Failed: true, Permanent: true}, nil
		},
	}
	for name, fail := range failures {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			bothModes(t, func(t *testing.T, mode Mode) {
				b := setup(t, &Config{Mode: mode})
				ctx := context.Background()
				b.tool.behave = fail
				c := call("charge", `{"cents":100}`)

				res, err := b.exec.Execute(ctx, c)
				failedAsExpected := err != nil || res.Failed
				require.True(t, failedAsExpected)
				require.False(t, res.Replayed)

				_, err = b.st.Get(ctx, testScope, entryOf(t, b.exec, c).Key)
				require.ErrorIs(t, err, store.ErrNotFound, "a failure must not be stored")

				// The next identical call runs the tool again, and its
				// success is stored.
				b.tool.behave = nil
				res, err = b.exec.Execute(ctx, c)
				require.NoError(t, err)
				require.False(t, res.Replayed)
				require.EqualValues(t, 2, b.tool.runs.Load())
				res, err = b.exec.Execute(ctx, c)
				require.NoError(t, err)
				require.True(t, res.Replayed)
				require.EqualValues(t, 2, b.tool.runs.Load())
			})
		})
	}
}

func TestPermanentFailuresStoredOnlyUnderPolicy(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, mode Mode) {
		b := setup(t, &Config{Mode: mode, StorePermanentFailures: true})
		ctx := context.Background()
		refused := []byte(`{"error":"card declined"}`)
		b.tool.behave = func(_ context.Context, c Call) (Result, error) {
			if c.Tool == "flaky" {
				return Result{Output: []byte("try later"), Failed: true}, nil
			}
			return Result{Output: refused, Failed: true, Permanent: true}, nil
		}

		first, err := b.exec.Execute(ctx, call("charge", `{"cents":100}`))
		require.NoError(t, err)
		require.Equal(t, Result{Output: refused, Failed: true, Permanent: true}, first)

		// Replayed as a stored failure, without running the tool.
		again, err := b.exec.Execute(ctx, call("charge", `{"cents":100}`))
		require.NoError(t, err)
		require.Equal(t, Result{Output: refused, Failed: true, Permanent: true, Replayed: true}, again)
		require.EqualValues(t, 1, b.tool.runs.Load())

		rec, err := b.st.Get(ctx, testScope, entryOf(t, b.exec, call("charge", `{"cents":100}`)).Key)
		require.NoError(t, err)
		require.Equal(t, store.KindPermanentFailure, rec.Outcome.Kind)

		// A failure that is not permanent is not stored even under the policy.
		_, err = b.exec.Execute(ctx, call("flaky", `{}`))
		require.NoError(t, err)
		_, err = b.exec.Execute(ctx, call("flaky", `{}`))
		require.NoError(t, err)
		require.EqualValues(t, 3, b.tool.runs.Load())
	})
}
