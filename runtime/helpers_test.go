package runtime

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/executor"
)

// timeline records, in one sequence, everything the loop reports or does,
// so that tests can check what happened and in which order.
type timeline struct {
	mu      sync.Mutex
	entries []string // guarded by mu
}

func (tl *timeline) add(s string) {
	tl.mu.Lock()
	tl.entries = append(tl.entries, s)
	tl.mu.Unlock()
}

func (tl *timeline) all() []string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return append([]string(nil), tl.entries...)
}

// with returns the entries that start with prefix.
func (tl *timeline) with(prefix string) []string {
	var out []string
	for _, e := range tl.all() {
		if strings.HasPrefix(e, prefix) {
			out = append(out, e)
		}
	}
	return out
}

// mentioning returns the entries that contain s.
func (tl *timeline) mentioning(s string) []string {
	var out []string
	for _, e := range tl.all() {
		if strings.Contains(e, s) {
			out = append(out, e)
		}
	}
	return out
}

// steps returns the progress steps that contain s.
func (tl *timeline) steps(s string) []string {
	var out []string
	for _, e := range tl.with("step: ") {
		if strings.Contains(e, s) {
			out = append(out, e)
		}
	}
	return out
}

func (tl *timeline) index(entry string) int {
	for i, e := range tl.all() {
		if e == entry {
			return i
		}
	}
	return -1
}

// countingTool is a registered tool that counts its real runs.
type countingTool struct {
	name string
	tl   *timeline
	runs atomic.Int32
	fn   func(ctx context.Context, call executor.Call) (executor.Result, error) // nil: succeed with "ran NAME"
}

func (c *countingTool) Execute(ctx context.Context, call executor.Call) (executor.Result, error) {
	c.runs.Add(1)
	c.tl.add("run: " + c.name)
	if c.fn != nil {
		return c.fn(ctx, call)
	}
	return executor.Result{Output: []byte("ran " + c.name)}, nil
}

// fakeExec is a small probe-then-store executor in front of the registry:
// enough to test the loop without a real store. It keys calls by invocation
// id, else by tool and compact arguments.
type fakeExec struct {
	inner executor.Executor
	tl    *timeline

	mu       sync.Mutex
	stored   map[string]executor.Result // guarded by mu
	probes   [][]executor.Call          // guarded by mu
	executed []executor.Call            // guarded by mu
	probeErr error                      // the whole probe fails
	badCall  map[string]error           // Probe.Err by tool name
	blind    bool                       // the probe misses even stored calls (stored meanwhile)
}

func fakeKey(c executor.Call) string {
	if c.InvocationID != "" {
		return "id|" + c.InvocationID
	}
	return c.Tool + "|" + string(compactJSON(c.Args))
}

func (f *fakeExec) store(c executor.Call, res executor.Result) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stored[fakeKey(c)] = res
}

func (f *fakeExec) Probe(_ context.Context, calls []executor.Call) ([]executor.Probe, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.probes = append(f.probes, append([]executor.Call(nil), calls...))
	names := make([]string, len(calls))
	for i, c := range calls {
		names[i] = c.Tool
	}
	f.tl.add("probe: " + strings.Join(names, ","))
	if f.probeErr != nil {
		return nil, f.probeErr
	}
	out := make([]executor.Probe, len(calls))
	for i, c := range calls {
		if err := f.badCall[c.Tool]; err != nil {
			out[i].Err = err
			continue
		}
		if res, ok := f.stored[fakeKey(c)]; ok && !f.blind {
			res.Replayed = true
			out[i] = executor.Probe{Hit: true, Result: res}
		}
	}
	return out, nil
}

func (f *fakeExec) Execute(ctx context.Context, call executor.Call) (executor.Result, error) {
	f.mu.Lock()
	f.executed = append(f.executed, call)
	res, ok := f.stored[fakeKey(call)]
	f.mu.Unlock()
	if ok {
		res.Replayed = true
		return res, nil
	}
	res, err := f.inner.Execute(ctx, call)
	if err == nil && (!res.Failed || res.Permanent) {
		f.store(call, res)
	}
	return res, err
}

func (f *fakeExec) probeCalls() [][]executor.Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]executor.Call(nil), f.probes...)
}

func (f *fakeExec) executedCalls() []executor.Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]executor.Call(nil), f.executed...)
}

// recordingObserver writes observer calls to the timeline.
type recordingObserver struct{ tl *timeline }

func (o recordingObserver) OnToolStarted(_ context.Context, e Event) {
	o.tl.add("observer: started " + e.Call.Tool + " " + e.Call.ProviderCallID)
}

func (o recordingObserver) OnToolCompleted(_ context.Context, e Event) {
	o.tl.add("observer: completed " + e.Call.Tool + " " + e.Call.ProviderCallID + " " + e.Status.String())
}

// recordingBus writes published events to the timeline.
type recordingBus struct{ tl *timeline }

func (b recordingBus) Publish(_ context.Context, e Event) error {
	s := "bus: " + string(e.Kind)
	if e.Call.Tool != "" {
		s += " " + e.Call.Tool + " " + e.Call.ProviderCallID
	}
	b.tl.add(s)
	return nil
}

// testBundle is the setup shared by the loop's tests: a registry with a
// read-only "lookup" and a side-effecting "send", a fake probing executor
// around it, and a timeline behind progress, observers and bus.
type testBundle struct {
	tl     *timeline
	reg    *Registry
	exec   *fakeExec
	lookup *countingTool
	send   *countingTool
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	tl := &timeline{}
	b := &testBundle{
		tl:     tl,
		reg:    NewRegistry(),
		lookup: &countingTool{name: "lookup", tl: tl},
		send:   &countingTool{name: "send", tl: tl},
	}
	require.NoError(t, b.reg.Register(ToolSpec{Name: "lookup", Description: "reads a customer", Parameters: json.RawMessage(`{"type":"object"}`)}, b.lookup))
	require.NoError(t, b.reg.Register(ToolSpec{Name: "send", Description: "sends a mail", Parameters: json.RawMessage(`{"type":"object"}`)}, b.send))
	b.exec = &fakeExec{inner: b.reg, tl: tl, stored: make(map[string]executor.Result)}
	return b
}

// config returns a Config wired to the bundle; the test adjusts it.
func (b *testBundle) config(model Model) *Config {
	return &Config{
		Model:     model,
		Tools:     b.reg,
		Executor:  b.exec,
		Progress:  func(step string) { b.tl.add("step: " + step) },
		Observers: []Observer{recordingObserver{tl: b.tl}},
		Bus:       recordingBus{tl: b.tl},
	}
}

func (b *testBundle) run(t *testing.T, cfg *Config, input string) (Transcript, error) {
	t.Helper()
	rt, err := New(cfg)
	require.NoError(t, err)
	return rt.Run(context.Background(), input)
}

func call(id, tool, args string) executor.Call {
	return executor.Call{ProviderCallID: id, Tool: tool, Args: json.RawMessage(args)}
}

func toolCalls(calls ...executor.Call) Response { return Response{ToolCalls: calls} }

func answer(text string) Response { return Response{Text: text} }

// toolMessage returns the tool message answering call id in req.
func toolMessage(t *testing.T, req Request, id string) Message {
	t.Helper()
	for _, m := range req.Messages {
		if m.Role == RoleTool && m.ProviderCallID == id {
			return m
		}
	}
	require.Failf(t, "no tool message", "for call %q", id)
	return Message{}
}

func entryFor(t *testing.T, tr Transcript, id string) CallEntry {
	t.Helper()
	for _, e := range tr.Calls {
		if e.Call.ProviderCallID == id {
			return e
		}
	}
	require.Failf(t, "no transcript entry", "for call %q", id)
	return CallEntry{}
}

func toolEventsFor(tr Transcript, tool string) []Event {
	var out []Event
	for _, e := range tr.Events {
		if e.Call.Tool == tool {
			out = append(out, e)
		}
	}
	return out
}
