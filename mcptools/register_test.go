package mcptools_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/executor"
	"github.com/idemstore/idemstore/internal/mcptest"
	"github.com/idemstore/idemstore/mcptools"
	agent "github.com/idemstore/idemstore/runtime"
	"github.com/idemstore/idemstore/runtime/runtimetest"
	"github.com/idemstore/idemstore/store/memstore"
)

func TestRegisterPutsTheServersToolsInTheRegistry(t *testing.T) {
	t.Parallel()
	srv := startServer(t, nil)
	reg := agent.NewRegistry()
	specs, err := mcptools.Register(testContext(t), reg, srv.session, &mcptools.RegisterOptions{Prefix: "up_"})
	require.NoError(t, err)
	require.Equal(t, specs, reg.Specs())

	byName := make(map[string]agent.ToolSpec)
	for _, s := range specs {
		byName[s.Name] = s
	}
	send, ok := byName["up_"+mcptest.ToolSend]
	require.True(t, ok, "registered under the prefix: %v", specs)
	require.Equal(t, json.RawMessage(mcptest.SendSchema), send.Parameters, "the input schema byte for byte")
	require.Equal(t, "Sends a message (a side effect): each run is logged.", send.Description)

	res, err := reg.Execute(testContext(t), executor.Call{Tool: "up_send", Args: json.RawMessage(`{"to":"ada"}`)})
	require.NoError(t, err)
	require.Contains(t, string(res.Output), `"structuredContent":`+sendStructured, "the prefixed name calls the server's tool")

	_, err = mcptools.Register(testContext(t), reg, srv.session, &mcptools.RegisterOptions{Prefix: "up_"})
	require.ErrorIs(t, err, agent.ErrDuplicateTool)
}

// sendOnce is a model that asks for send until it sees its result, then
// answers; every gate attempt asks again.
func sendOnce() *runtimetest.ScriptedModel {
	return runtimetest.NewScriptedFunc(func(n int, req agent.Request) (agent.Response, error) {
		if last := req.Messages[len(req.Messages)-1]; last.Role == agent.RoleTool {
			return agent.Response{Text: "sent: " + last.Content}, nil
		}
		return agent.Response{ToolCalls: []executor.Call{{
			ProviderCallID: "call-" + string(rune('a'+n)), Tool: mcptest.ToolSend, Args: json.RawMessage(`{"to":"ada","body":"welcome"}`),
		}}}, nil
	})
}

func TestRetriedRunReplaysMCPToolCallsAndTheToolRunsOnce(t *testing.T) {
	t.Parallel()
	srv := startServer(t, nil)
	reg := agent.NewRegistry()
	_, err := mcptools.Register(testContext(t), reg, srv.session, nil)
	require.NoError(t, err)
	st, err := memstore.New(nil)
	require.NoError(t, err)
	rejectFirst := 0
	gate := agent.GateFunc(func(context.Context, string) (agent.Verdict, error) {
		rejectFirst++
		return agent.Verdict{Accepted: rejectFirst > 1, Feedback: "Say whom you mailed."}, nil
	})
	rt, err := agent.New(&agent.Config{Model: sendOnce(), Tools: reg, Store: st, QualityGates: []agent.Gate{gate}})
	require.NoError(t, err)

	tr, err := rt.Run(testContext(t), "run-1", "Welcome Ada.")
	require.NoError(t, err)
	require.Equal(t, 2, tr.GateAttempts)
	require.Len(t, tr.Calls, 2)
	require.Equal(t, agent.StatusSucceeded, tr.Calls[0].Status)
	require.Equal(t, agent.StatusReplayed, tr.Calls[1].Status, "the gate's retry replays the MCP call")
	require.Equal(t, tr.Calls[0].Output, tr.Calls[1].Output)
	require.Contains(t, tr.Steps, "  send reused cached result: "+agent.Abbreviate(tr.Calls[0].Output, 0))

	// A retried request: the same run again.
	tr2, err := rt.Run(testContext(t), "run-1", "Welcome Ada.")
	require.NoError(t, err)
	require.Equal(t, agent.StatusReplayed, tr2.Calls[0].Status)
	require.Equal(t, tr.Calls[0].Output, tr2.Calls[0].Output)
	require.Equal(t, 1, srv.runs(t, mcptest.ToolSend), "the side effect happened once")

	// Another run is another scope: it sends again.
	tr3, err := rt.Run(testContext(t), "run-2", "Welcome Ada.")
	require.NoError(t, err)
	require.Equal(t, agent.StatusSucceeded, tr3.Calls[0].Status)
	require.Equal(t, 2, srv.runs(t, mcptest.ToolSend))
}
