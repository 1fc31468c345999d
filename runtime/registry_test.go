package runtime

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/executor"
)

func TestRegistryRefusesDuplicateAndInvalidSpecs(t *testing.T) {
	t.Parallel()
	ok := executor.ExecutorFunc(func(context.Context, executor.Call) (executor.Result, error) { return executor.Result{}, nil })
	r := NewRegistry()
	require.NoError(t, r.Register(ToolSpec{Name: "a"}, ok))

	for _, tc := range []struct {
		name string
		spec ToolSpec
		exec executor.Executor
		want error
	}{
		{"duplicate", ToolSpec{Name: "a"}, ok, ErrDuplicateTool},
		{"empty name", ToolSpec{}, ok, ErrInvalidToolSpec},
		{"nil executor", ToolSpec{Name: "b"}, nil, ErrInvalidToolSpec},
		{"schema not JSON", ToolSpec{Name: "c", Parameters: json.RawMessage(`{`)}, ok, ErrInvalidToolSpec},
	} {
		err := r.Register(tc.spec, tc.exec)
		require.ErrorIs(t, err, tc.want, tc.name)
		var te *ToolError
		require.ErrorAs(t, err, &te, tc.name)
	}
	require.Len(t, r.Specs(), 1, "a refused registration changes nothing")
}

func TestRegistryDispatcherRefusesUnknownAndNotAllowedTools(t *testing.T) {
	t.Parallel()
	var ran []string
	tool := func(name string) executor.Executor {
		return executor.ExecutorFunc(func(context.Context, executor.Call) (executor.Result, error) {
			ran = append(ran, name)
			return executor.Result{Output: []byte(name)}, nil
		})
	}
	r := NewRegistry()
	require.NoError(t, r.Register(ToolSpec{Name: "read"}, tool("read")))
	require.NoError(t, r.Register(ToolSpec{Name: "write"}, tool("write")))
	r.Allow("read")

	_, err := r.Execute(context.Background(), executor.Call{Tool: "write"})
	require.ErrorIs(t, err, ErrToolNotAllowed)
	_, err = r.Execute(context.Background(), executor.Call{Tool: "nope"})
	require.ErrorIs(t, err, ErrUnknownTool)
	res, err := r.Execute(context.Background(), executor.Call{Tool: "read"})
	require.NoError(t, err)
	require.Equal(t, "read", string(res.Output))
	require.Equal(t, []string{"read"}, ran)
	require.Equal(t, []ToolSpec{{Name: "read"}}, r.Specs())
}

type reconcilingTool struct{ executor.ExecutorFunc }

func (reconcilingTool) Reconcile(context.Context, executor.Call) (executor.Result, bool, error) {
	return executor.Result{Output: []byte("already sent")}, true, nil
}

func TestRegistryPassesReconcileToTheTool(t *testing.T) {
	t.Parallel()
	noop := executor.ExecutorFunc(func(context.Context, executor.Call) (executor.Result, error) { return executor.Result{}, nil })
	r := NewRegistry()
	require.NoError(t, r.Register(ToolSpec{Name: "send"}, reconcilingTool{noop}))
	require.NoError(t, r.Register(ToolSpec{Name: "read"}, noop))

	res, found, err := r.Reconcile(context.Background(), executor.Call{Tool: "send"})
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, "already sent", string(res.Output))

	_, found, err = r.Reconcile(context.Background(), executor.Call{Tool: "read"})
	require.NoError(t, err)
	require.False(t, found, "a tool that cannot tell answers not found")
}
