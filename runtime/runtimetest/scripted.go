// Package runtimetest holds what users' own tests of an agent need: a
// scripted model. It lives apart from package runtime so that production
// code carries no test doubles.
package runtimetest

import (
	"errors"

	"github.com/idemstore/idemstore/runtime"

	"context"
	"slices"
	"sync"
)

// ErrScriptExhausted: a ScriptedModel was asked for more responses than it
// holds.
var ErrScriptExhausted = errors.New("runtimetest: scripted model has no more responses")

// ScriptedModel is a deterministic runtime.Model for tests and demos: it answers
// each request with the next response of its script, or with what its
// function returns. It records every request it was sent, so that a test can
// check what the model saw (for example the full stored output of a replayed
// call, or a gate's feedback). Safe for concurrent use.
type ScriptedModel struct {
	fn func(turn int, req runtime.Request) (runtime.Response, error) // nil: play responses

	mu        sync.Mutex
	responses []runtime.Response // guarded by mu
	requests  []runtime.Request  // guarded by mu
}

// NewScriptedModel returns a model that answers the n-th request with the
// n-th response; past the end of the script it returns ErrScriptExhausted.
func NewScriptedModel(responses ...runtime.Response) *ScriptedModel {
	return &ScriptedModel{responses: slices.Clone(responses)}
}

// NewScriptedFunc returns a model that answers with fn, called with the
// request's number (0 for the first request) and the request. fn is called
// with the model's lock held, so it sees requests one at a time.
func NewScriptedFunc(fn func(n int, req runtime.Request) (runtime.Response, error)) *ScriptedModel {
	return &ScriptedModel{fn: fn}
}

// Complete records req and returns the next scripted response. It honours
// ctx: a done ctx gives ctx's error and consumes nothing.
func (m *ScriptedModel) Complete(ctx context.Context, req runtime.Request) (runtime.Response, error) {
	if err := ctx.Err(); err != nil {
		return runtime.Response{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n := len(m.requests)
	m.requests = append(m.requests, req)
	if m.fn != nil {
		return m.fn(n, req)
	}
	if n >= len(m.responses) {
		return runtime.Response{}, ErrScriptExhausted
	}
	resp := m.responses[n]
	resp.ToolCalls = slices.Clone(resp.ToolCalls)
	return resp, nil
}

// Requests returns the requests the model was sent, in order.
func (m *ScriptedModel) Requests() []runtime.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.requests)
}
