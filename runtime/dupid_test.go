package runtime_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/executor"
	agent "github.com/idemstore/idemstore/runtime"
	"github.com/idemstore/idemstore/store"
)

// Two calls of one turn with the same invocation id and other arguments
// are one operation asked for two ways: the second is refused as a bad call
// with a typed error naming the id, before anything reports it, and never
// runs, in either mode.
func TestInvocationIDTwiceInATurnWithOtherArgumentsIsRefused(t *testing.T) {
	t.Parallel()
	for _, mode := range []executor.Mode{executor.ModeExclusive, executor.ModeProbeThenStore} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			b := setupReal(t, &executor.Config{Mode: mode})
			first := call("x", "send_mail", `{"to":"ada@example.com"}`)
			first.InvocationID = "welcome-mail"
			second := call("y", "send_mail", `{"to":"bob@example.com"}`)
			second.InvocationID = "welcome-mail"
			model := scripted(toolCalls(first, second), answer("ok"))

			tr, err := b.runtime(t, model).Run(context.Background(), "run-dup-id", "mail")
			require.NoError(t, err)
			require.EqualValues(t, 1, b.sends.Load())
			require.Equal(t, agent.StatusSucceeded, entryFor(t, tr, "x").Status)
			y := entryFor(t, tr, "y")
			require.Equal(t, agent.StatusRefused, y.Status)
			var dup *executor.DuplicateIDError
			require.ErrorAs(t, y.Err, &dup)
			require.Equal(t, "welcome-mail", dup.InvocationID)
			require.ErrorIs(t, y.Err, store.ErrFingerprintMismatch)
			require.Equal(t, contract.ClassBadCall, executor.ClassOf(y.Err))
			require.Contains(t, y.Err.Error(), `"welcome-mail"`)
			require.Equal(t, 1, tr.Invocations, "the refused call was never reported as a real call")
			require.Len(t, containing(tr.Steps, "  send_mail refused: "), 1)
			require.True(t, toolMessage(t, model.Requests()[1], "y").IsError)
		})
	}
}

// Two calls of one turn with the same invocation id and the same arguments
// are one call: it runs once and the second replays it.
func TestInvocationIDTwiceInATurnWithTheSameArgumentsRunsOnce(t *testing.T) {
	t.Parallel()
	for _, mode := range []executor.Mode{executor.ModeExclusive, executor.ModeProbeThenStore} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			b := setupReal(t, &executor.Config{Mode: mode})
			first := call("x", "send_mail", `{"to":"ada@example.com"}`)
			first.InvocationID = "welcome-mail"
			second := call("y", "send_mail", ` { "to" : "ada@example.com" } `)
			second.InvocationID = "welcome-mail"
			model := scripted(toolCalls(first, second), answer("ok"))

			tr, err := b.runtime(t, model).Run(context.Background(), "run-dup-id", "mail")
			require.NoError(t, err)
			require.EqualValues(t, 1, b.sends.Load())
			require.Equal(t, agent.StatusSucceeded, entryFor(t, tr, "x").Status)
			y := entryFor(t, tr, "y")
			require.Equal(t, agent.StatusReplayed, y.Status)
			require.NoError(t, y.Err)
			require.Equal(t, entryFor(t, tr, "x").Output, y.Output)
		})
	}
}
