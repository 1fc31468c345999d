package executor

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
)

func TestInvocationIDWithDifferentArgumentsIsRefused(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, mode Mode) {
		b := setup(t, &Config{Mode: mode})
		ctx := context.Background()
		orig := idCall("inv-7", "send_mail", `{"to":"a@example.com"}`)
		first, err := b.exec.Execute(ctx, orig)
		require.NoError(t, err)

		for name, c := range map[string]Call{
			"other arguments": idCall("inv-7", "send_mail", `{"to":"b@example.com"}`),
			"other tool":      idCall("inv-7", "send_sms", `{"to":"a@example.com"}`),
		} {
			_, err := b.exec.Execute(ctx, c)
			require.ErrorIs(t, err, store.ErrFingerprintMismatch, name)
			var mm *store.MismatchError
			require.ErrorAs(t, err, &mm, name)
			require.Equal(t, entryOf(t, b.exec, orig).Fingerprint, mm.Stored)
			require.Equal(t, entryOf(t, b.exec, c).Fingerprint, mm.Requested)

			preps, err := b.exec.Prepare(ctx, []Call{c})
			require.NoError(t, err)
			require.ErrorIs(t, preps[0].Err, store.ErrFingerprintMismatch, name)
			require.False(t, preps[0].Replayed)
			_, err = preps[0].Run(ctx)
			require.ErrorIs(t, err, store.ErrFingerprintMismatch, name)
			require.Equal(t, contract.ClassBadCall, ClassOf(err))
		}
		require.EqualValues(t, 1, b.tool.runs.Load(), "a refused call never runs")

		// Nothing was overwritten: the original call still replays its outcome.
		again, err := b.exec.Execute(ctx, orig)
		require.NoError(t, err)
		require.True(t, again.Replayed)
		require.Equal(t, first.Output, again.Output)
	})
}

func TestInvocationIDWithDifferentArgumentsIsRefusedWhileInFlight(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	g := newGate()
	b.tool.behave = func(context.Context, Call) (Result, error) { g.wait(); return Result{Output: []byte("sent")}, nil }
	holder := goExecute(ctx, b.exec, idCall("inv-8", "send_mail", `{"to":"a@example.com"}`))
	g.awaitStart(t)

	// Refused at once, without waiting for the holder.
	_, err := b.exec.Execute(ctx, idCall("inv-8", "send_mail", `{"to":"b@example.com"}`))
	require.ErrorIs(t, err, store.ErrFingerprintMismatch)

	g.release()
	r := await(t, holder)
	require.NoError(t, r.err)
	require.Equal(t, "sent", string(r.res.Output))
	require.EqualValues(t, 1, b.tool.runs.Load())
}

func TestIDKeysAndArgKeysAreSeparate(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, mode Mode) {
		b := setup(t, &Config{Mode: mode})
		ctx := context.Background()
		var keys []keyhash.Sum
		b.tool.behave = func(ctx context.Context, c Call) (Result, error) {
			info, ok := CallInfoFrom(ctx)
			if !ok {
				return Result{}, errors.New("no call info")
			}
			keys = append(keys, info.Key)
			return Result{Output: []byte("id:" + c.InvocationID)}, nil
		}
		withID := idCall("inv-1", "lookup", `{"q":"x"}`)
		withoutID := call("lookup", `{"q":"x"}`)

		_, err := b.exec.Execute(ctx, withID)
		require.NoError(t, err)
		// Same tool and arguments without the id: another key, so it runs.
		res, err := b.exec.Execute(ctx, withoutID)
		require.NoError(t, err)
		require.False(t, res.Replayed)
		require.EqualValues(t, 2, b.tool.runs.Load())
		require.Len(t, keys, 2)
		require.NotEqual(t, keys[0], keys[1])
		require.Equal(t, keyhash.IDKey("inv-1"), keys[0])
		canon, err := keyhash.Canonicalize([]byte(`{"q":"x"}`), store.Limits{})
		require.NoError(t, err)
		require.Equal(t, keyhash.ArgsKey("lookup", canon), keys[1])

		// Each replays its own outcome.
		res, err = b.exec.Execute(ctx, withID)
		require.NoError(t, err)
		require.Equal(t, Result{Output: []byte("id:inv-1"), Replayed: true}, res)
		res, err = b.exec.Execute(ctx, withoutID)
		require.NoError(t, err)
		require.Equal(t, Result{Output: []byte("id:"), Replayed: true}, res)
	})
}
