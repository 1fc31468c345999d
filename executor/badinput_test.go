package executor

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/memstore"
)

func TestBadInputIsRejectedBeforeTheStore(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat("[", 1000) + strings.Repeat("]", 1000)
	huge := `{"blob":"` + strings.Repeat("x", 10<<20) + `"}`
	cases := []struct {
		name string
		call Call
		want error
	}{
		{"empty tool name", call("", `{}`), store.ErrInvalidInput},
		{"tool name with NUL", call("a\x00b", `{}`), store.ErrInvalidInput},
		{"tool name not UTF-8", call("\xff", `{}`), store.ErrInvalidInput},
		{"tool name too long", call(strings.Repeat("t", 257), `{}`), store.ErrTooLarge},
		{"invalid JSON", call("t", `{"a":`), store.ErrInvalidArguments},
		{"arguments not UTF-8", call("t", "{\"a\":\"\xff\"}"), store.ErrInvalidArguments},
		{"10 MB of arguments", call("t", huge), store.ErrTooLarge},
		{"1,000 levels of nesting", call("t", `{"a":`+deep+`}`), store.ErrTooLarge},
		{"invocation id too long", idCall(strings.Repeat("i", 257), "t", `{}`), store.ErrTooLarge},
		{"invocation id not UTF-8", idCall("\xff", "t", `{}`), store.ErrInvalidInput},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			bothModes(t, func(t *testing.T, mode Mode) {
				b := setup(t, nil)
				counting := &countingStore{Store: b.st}
				exec := b.newExec(t, b.tool, &Config{Mode: mode})
				exec.st = counting
				ctx := context.Background()
				before := b.st.Stats()

				res, err := exec.Execute(ctx, tc.call)
				require.ErrorIs(t, err, tc.want)
				require.Equal(t, Result{}, res)

				probes, err := exec.Probe(ctx, []Call{tc.call})
				require.NoError(t, err)
				require.ErrorIs(t, probes[0].Err, tc.want)

				require.Zero(t, b.tool.runs.Load(), "the tool never ran")
				require.Zero(t, counting.calls(), "the store was never asked")
				require.Equal(t, before, b.st.Stats(), "nothing was stored")
			})
		})
	}
}

func TestValidOddArgumentsAreAccepted(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	for _, args := range []string{`{"x":"NaN"}`, `{"x":"Infinity"}`, `{"x":"-0"}`, `{"x":["NaN",1e400]}`, ``, `null`} {
		_, err := b.exec.Execute(ctx, call("t", args))
		require.NoError(t, err, args)
	}
}

func TestNewRejectsBadSetup(t *testing.T) {
	t.Parallel()
	st, err := memstore.New(nil)
	require.NoError(t, err)
	tool := &countingTool{}
	cases := []struct {
		name  string
		inner Executor
		st    store.Store
		scope string
		cfg   *Config
		want  error
	}{
		{"nil inner", nil, st, "run", nil, store.ErrInvalidInput},
		{"nil store", tool, nil, "run", nil, store.ErrInvalidInput},
		{"empty scope", tool, st, "", nil, store.ErrInvalidInput},
		{"scope too long", tool, st, strings.Repeat("s", 257), nil, store.ErrTooLarge},
		{"scope not UTF-8", tool, st, "\xff", nil, store.ErrInvalidInput},
		{"scope with NUL", tool, st, "a\x00", nil, store.ErrInvalidInput},
		{"unknown mode", tool, st, "run", &Config{Mode: 9}, store.ErrInvalidInput},
		{"negative lease", tool, st, "run", &Config{Lease: -1}, store.ErrInvalidInput},
		{"renewal not shorter than the lease", tool, st, "run", &Config{Lease: 10, RenewEvery: 10}, store.ErrInvalidInput},
		{"negative max wait", tool, st, "run", &Config{MaxWait: -1}, store.ErrInvalidInput},
		{"negative scope ttl", tool, st, "run", &Config{ScopeTTL: -1}, store.ErrInvalidInput},
	}
	for _, tc := range cases {
		e, err := New(tc.inner, tc.st, tc.scope, tc.cfg)
		require.ErrorIs(t, err, tc.want, tc.name)
		require.Nil(t, e, tc.name)
	}
	require.Zero(t, tool.runs.Load())
	require.Equal(t, store.Stats{}, st.Stats())
}

func TestResultOverTheStoreLimitIsNotStoredAndLeavesNoClaim(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, mode Mode) {
		st, err := memstore.New(&memstore.Config{Limits: store.Limits{MaxResultBytes: 16}})
		require.NoError(t, err)
		tool := &countingTool{behave: func(context.Context, Call) (Result, error) {
			return Result{Output: []byte(strings.Repeat("r", 17))}, nil
		}}
		exec, err := New(tool, st, testScope, &Config{Mode: mode})
		require.NoError(t, err)
		ctx := context.Background()
		c := call("t", `{}`)

		res, err := exec.Execute(ctx, c)
		require.ErrorIs(t, err, store.ErrTooLarge)
		var limit *store.LimitError
		require.ErrorAs(t, err, &limit)
		require.Equal(t, "MaxResultBytes", limit.Limit)
		var notStored *OutcomeNotStoredError
		require.ErrorAs(t, err, &notStored)
		require.Len(t, notStored.Result.Output, 17)
		require.Len(t, res.Output, 17)

		_, err = st.Get(ctx, testScope, entryOf(t, exec, c).Key)
		require.ErrorIs(t, err, store.ErrNotFound)
		// No claim was left behind: the next call runs at once.
		_, err = exec.Execute(ctx, c)
		require.ErrorIs(t, err, store.ErrTooLarge)
		require.EqualValues(t, 2, tool.runs.Load())
		require.Zero(t, st.Stats().Waits)
	})
}
