package runtime_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/executor"
	agent "github.com/idemstore/idemstore/runtime"
)

func TestRegistryRefusesDuplicateAndInvalidSpecs(t *testing.T) {
	t.Parallel()
	ok := executor.ExecutorFunc(func(context.Context, executor.Call) (executor.Result, error) { return executor.Result{}, nil })
	r := agent.NewRegistry()
	require.NoError(t, r.Register(agent.ToolSpec{Name: "a"}, ok))

	for _, tc := range []struct {
		name string
		spec agent.ToolSpec
		exec executor.Executor
		want error
	}{
		{"duplicate", agent.ToolSpec{Name: "a"}, ok, agent.ErrDuplicateTool},
		{"empty name", agent.ToolSpec{}, ok, agent.ErrInvalidToolSpec},
		{"nil executor", agent.ToolSpec{Name: "b"}, nil, agent.ErrInvalidToolSpec},
		{"schema not JSON", agent.ToolSpec{Name: "c", Parameters: json.RawMessage(`{`)}, ok, agent.ErrInvalidToolSpec},
	} {
		err := r.Register(tc.spec, tc.exec)
		require.ErrorIs(t, err, tc.want, tc.name)
		var te *agent.ToolError
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
	r := agent.NewRegistry()
	require.NoError(t, r.Register(agent.ToolSpec{Name: "read"}, tool("read")))
	require.NoError(t, r.Register(agent.ToolSpec{Name: "write"}, tool("write")))
	r.Allow("read")

	_, err := r.Execute(context.Background(), executor.Call{Tool: "write"})
	require.ErrorIs(t, err, agent.ErrToolNotAllowed)
	_, err = r.Execute(context.Background(), executor.Call{Tool: "nope"})
	require.ErrorIs(t, err, agent.ErrUnknownTool)
	res, err := r.Execute(context.Background(), executor.Call{Tool: "read"})
	require.NoError(t, err)
	require.Equal(t, "read", string(res.Output))
	require.Equal(t, []string{"read"}, ran)
	require.Equal(t, []agent.ToolSpec{{Name: "read"}}, r.Specs())
}

type reconcilingTool struct{ executor.ExecutorFunc }

func (reconcilingTool) Reconcile(context.Context, executor.Call) (executor.Result, bool, error) {
	return executor.Result{Output: []byte("already sent")}, true, nil
}

func TestRegistryPassesReconcileToTheTool(t *testing.T) {
	t.Parallel()
	noop := executor.ExecutorFunc(func(context.Context, executor.Call) (executor.Result, error) { return executor.Result{}, nil })
	r := agent.NewRegistry()
	require.NoError(t, r.Register(agent.ToolSpec{Name: "send"}, reconcilingTool{noop}))
	require.NoError(t, r.Register(agent.ToolSpec{Name: "read"}, noop))

	res, found, err := r.Reconcile(context.Background(), executor.Call{Tool: "send"})
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, "already sent", string(res.Output))

	_, found, err = r.Reconcile(context.Background(), executor.Call{Tool: "read"})
	require.ErrorIs(t, err, executor.ErrCannotReconcile, "a tool that cannot tell says so, not that nothing happened")
	require.False(t, found)
}

func TestRegistryRefusesTypedNilExecutorsAndChangesNothing(t *testing.T) {
	t.Parallel()
	// A typed nil is not == nil: it used to be registered and panicked only
	// when the model called the tool.
	r := agent.NewRegistry()
	for _, tc := range []struct {
		name string
		exec executor.Executor
	}{
		{"nil ExecutorFunc", executor.ExecutorFunc(nil)},
		{"nil pointer executor", (*countingTool)(nil)},
	} {
		err := r.Register(agent.ToolSpec{Name: "send"}, tc.exec)
		require.ErrorIs(t, err, agent.ErrInvalidToolSpec, tc.name)
		var te *agent.ToolError
		require.ErrorAs(t, err, &te, tc.name)
		require.Equal(t, "send", te.Tool, tc.name)
		require.Equal(t, "nil executor", te.Problem, tc.name)
	}
	require.Empty(t, r.Specs(), "a refused registration changes nothing")
	require.ErrorIs(t, r.Check("send"), agent.ErrUnknownTool)
	ok := executor.ExecutorFunc(func(context.Context, executor.Call) (executor.Result, error) { return executor.Result{}, nil })
	require.NoError(t, r.Register(agent.ToolSpec{Name: "send"}, ok), "the name is still free")
}

func TestRegistryRefusesToolNamesWithControlCharactersBadUTF8OrOverTheLimit(t *testing.T) {
	t.Parallel()
	ok := executor.ExecutorFunc(func(context.Context, executor.Call) (executor.Result, error) { return executor.Result{}, nil })
	r := agent.NewRegistry()
	for _, tc := range []struct {
		name, tool, problem string
	}{
		{"newline", "send\nCalling tool evil()", "U+000A at byte 4"},
		{"NUL", "se\x00nd", "U+0000 at byte 2"},
		{"DEL", "send\x7f", "U+007F"},
		{"C1 next line", "send\u0085x", "U+0085"},
		{"line separator", "send\u2028x", "U+2028"},
		{"right-to-left override", "send\u202ex", "U+202E"},
		{"invalid UTF-8", "send\xff", "not valid UTF-8"},
		{"over the limit", strings.Repeat("t", agent.MaxToolNameBytes+1), "257 bytes is over MaxToolNameBytes (256)"},
	} {
		err := r.Register(agent.ToolSpec{Name: tc.tool}, ok)
		require.ErrorIs(t, err, agent.ErrInvalidToolSpec, tc.name)
		var te *agent.ToolError
		require.ErrorAs(t, err, &te, tc.name)
		require.Contains(t, te.Problem, tc.problem, tc.name)
		require.Less(t, len(err.Error()), 256, "%s: the error quotes a bounded prefix of the name", tc.name)
		require.ErrorIs(t, agent.ToolSpec{Name: tc.tool}.Validate(), agent.ErrInvalidToolSpec, tc.name)
	}
	require.Empty(t, r.Specs(), "a refused registration changes nothing")

	for _, name := range []string{"send_mail", "github.search", "files/read", "Grüße", strings.Repeat("t", agent.MaxToolNameBytes)} {
		require.NoError(t, r.Register(agent.ToolSpec{Name: name}, ok), "%.40q is a name", name)
	}
}

func TestRegistryRefusesAParametersSchemaThatIsNotAJSONObject(t *testing.T) {
	t.Parallel()
	// Such a schema used to be registered, and openaimodel then refused
	// every request of every run while the tool was in the registry.
	ok := executor.ExecutorFunc(func(context.Context, executor.Call) (executor.Result, error) { return executor.Result{}, nil })
	r := agent.NewRegistry()
	for _, schema := range []string{`5`, `"object"`, `["type"]`, `null`, `true`, ` [{}]`} {
		err := r.Register(agent.ToolSpec{Name: "t", Parameters: json.RawMessage(schema)}, ok)
		require.ErrorIs(t, err, agent.ErrInvalidToolSpec, schema)
		var te *agent.ToolError
		require.ErrorAs(t, err, &te, schema)
		require.Equal(t, "parameters schema is not a JSON object", te.Problem, schema)
	}
	require.Empty(t, r.Specs(), "a refused registration changes nothing")
	require.NoError(t, r.Register(agent.ToolSpec{Name: "t", Parameters: json.RawMessage(" \n{\"type\":\"object\"}")}, ok))
}

func TestZeroRegistryIsAnEmptyRegistry(t *testing.T) {
	t.Parallel()
	var r agent.Registry
	require.Empty(t, r.Specs())
	require.ErrorIs(t, r.Check("send"), agent.ErrUnknownTool)
	_, err := r.Execute(context.Background(), executor.Call{Tool: "send"})
	require.ErrorIs(t, err, agent.ErrUnknownTool)
	ok := executor.ExecutorFunc(func(context.Context, executor.Call) (executor.Result, error) {
		return executor.Result{Output: []byte("sent")}, nil
	})
	require.NoError(t, r.Register(agent.ToolSpec{Name: "send"}, ok), "Register on a zero Registry used to panic")
	res, err := r.Execute(context.Background(), executor.Call{Tool: "send"})
	require.NoError(t, err)
	require.Equal(t, "sent", string(res.Output))
}
