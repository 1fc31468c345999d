package openaimodel_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/executor"
	agent "github.com/idemstore/idemstore/runtime"
	"github.com/idemstore/idemstore/runtime/openaimodel/openaitest"
	"github.com/idemstore/idemstore/store/memstore"
)

// agentBundle is the runtime on the real pieces: a registry with a
// read-only lookup_customer and a side-effecting send_mail, each counting
// its real runs, behind executor.Idempotent over memstore.
type agentBundle struct {
	reg     *agent.Registry
	st      *memstore.Store
	lookups atomic.Int32
	sends   atomic.Int32

	mu    sync.Mutex
	steps []string // guarded by mu
}

func setupAgent(t *testing.T) *agentBundle {
	t.Helper()
	b := &agentBundle{reg: agent.NewRegistry()}
	for _, spec := range demoTools() {
		counter := &b.lookups
		out := `{"id":"c-42","name":"Ada Lovelace","email":"ada@example.com"}`
		if spec.Name == "send_mail" {
			counter, out = &b.sends, `{"status":"sent","message_id":"msg-1"}`
		}
		require.NoError(t, b.reg.Register(spec, executor.ExecutorFunc(func(context.Context, executor.Call) (executor.Result, error) {
			counter.Add(1)
			return executor.Result{Output: []byte(out)}, nil
		})))
	}
	st, err := memstore.New(nil)
	require.NoError(t, err)
	b.st = st
	return b
}

func (b *agentBundle) config(model agent.Model, fallbacks ...agent.Model) *agent.Config {
	return &agent.Config{
		Model:     model,
		Fallbacks: fallbacks,
		Tools:     b.reg,
		Store:     b.st,
		QualityGates: []agent.Gate{agent.GateFunc(func(_ context.Context, answer string) (agent.Verdict, error) {
			if strings.Contains(answer, "Ada Lovelace") {
				return agent.Verdict{Accepted: true}, nil
			}
			return agent.Verdict{Feedback: "Name the customer you mailed."}, nil
		})},
		Progress: func(s string) {
			b.mu.Lock()
			b.steps = append(b.steps, s)
			b.mu.Unlock()
		},
	}
}

func (b *agentBundle) run(t *testing.T, cfg *agent.Config) (agent.Transcript, error) {
	t.Helper()
	rt, err := agent.New(cfg)
	require.NoError(t, err)
	return rt.Run(context.Background(), "run-"+t.Name(), "Welcome customer c-42 by e-mail.")
}

func (b *agentBundle) stepsWith(s string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, st := range b.steps {
		if strings.Contains(st, s) {
			out = append(out, st)
		}
	}
	return out
}

// welcomeModel behaves on the wire like a model doing the demo's job: on the
// input or a gate's feedback it asks for both tools at once (parallel tool
// calls) with call ids of its own, new on every request; once it has their
// results it answers, naming the customer from the second attempt on (the
// first answer is rejected by the gate). Attempt = user messages so far.
func welcomeModel(n int, req openaitest.Request) openaitest.Reply {
	last := req.Messages[len(req.Messages)-1]
	attempt := 0
	for _, m := range req.Messages {
		if m.Role == "user" {
			attempt++
		}
	}
	if last.Role == "user" {
		id := func(tool string) string { return "call_" + tool + "_" + strconv.Itoa(n) }
		return openaitest.Calls(
			openaitest.Call(id("lookup"), "lookup_customer", `{"customer_id":"c-42"}`),
			openaitest.Call(id("send"), "send_mail", `{"to":"ada@example.com","subject":"Welcome aboard"}`),
		)
	}
	if attempt < 2 {
		return openaitest.Answer("I sent the welcome mail.")
	}
	var name string
	for _, m := range req.Messages {
		var c struct{ Name string }
		if m.Role == "tool" && json.Unmarshal([]byte(m.Content), &c) == nil && c.Name != "" {
			name = c.Name
		}
	}
	return openaitest.Answer("I sent the welcome mail to " + name + ".")
}

// toolMessageIDs returns, per request, the call ids its tool messages
// answer.
func toolMessageIDs(reqs []openaitest.Request) [][]string {
	var out [][]string
	for _, r := range reqs {
		var ids []string
		for _, m := range r.Messages {
			if m.Role == "tool" {
				ids = append(ids, m.ToolCallID)
			}
		}
		out = append(out, ids)
	}
	return out
}
