package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/executor"
	"github.com/idemstore/idemstore/internal/nilness"
)

// MaxToolNameBytes bounds a tool's name: the limit a store puts on a tool
// name by default (contract.DefaultMaxToolBytes), so that every name the
// registry takes can be recorded by a store with default limits.
const MaxToolNameBytes = contract.DefaultMaxToolBytes

// Registry holds the tools a runtime offers the model and dispatches calls
// to them. It is itself an executor.Executor (the dispatcher): give it to
// the runtime as Config.Tools, with a Config.Store, and the runtime runs it
// through one executor.Idempotent, so that a call asked for again in the
// same scope is replayed rather than run twice.
//
// An allow-list restricts which registered tools may run; the runtime refuses
// an unknown or not-allowed tool before probing and the dispatcher refuses it
// again, so such a tool never runs. A Registry is safe for concurrent use,
// and its zero value is an empty registry, as NewRegistry returns.
type Registry struct {
	mu      sync.RWMutex
	tools   map[string]registered // guarded by mu
	order   []string              // registration order, guarded by mu
	allowed map[string]bool       // nil: every registered tool; guarded by mu
}

type registered struct {
	spec ToolSpec
	exec executor.Executor
}

// NewRegistry returns an empty registry in which every registered tool is
// allowed until Allow is called.
func NewRegistry() *Registry {
	return &Registry{tools: make(map[string]registered)}
}

// Register adds a tool. A spec that Validate refuses, a nil executor, or a
// name already registered is refused with a *ToolError and changes nothing.
func (r *Registry) Register(spec ToolSpec, exec executor.Executor) error {
	if err := spec.Validate(); err != nil {
		return err
	}
	if nilness.IsNil(exec) {
		// A typed nil (executor.ExecutorFunc(nil), a nil *T) is as unusable
		// as nil: accepted, it would panic only when the model calls the tool.
		return &ToolError{Tool: spec.Name, Err: ErrInvalidToolSpec, Problem: "nil executor"}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.tools[spec.Name]; dup {
		return &ToolError{Tool: spec.Name, Err: ErrDuplicateTool}
	}
	if r.tools == nil {
		// A zero Registry (a struct field, var r Registry) works like
		// NewRegistry's: it used to panic on its first Register.
		r.tools = make(map[string]registered)
	}
	r.tools[spec.Name] = registered{spec: spec, exec: exec}
	r.order = append(r.order, spec.Name)
	return nil
}

// Validate checks a spec before it is registered: the name must be 1 to
// MaxToolNameBytes bytes of valid UTF-8 without control characters (C0 and
// C1, DEL), invisible format characters (U+200B, the bidirectional
// overrides …) or line and paragraph separators, and Parameters, when
// given, must be a JSON object. It returns nil or a *ToolError wrapping
// ErrInvalidToolSpec whose Problem names what is wrong.
//
// The name is shown in progress steps and logs and sent to the model and
// to the store: a newline in it would forge a second step, and a name no
// store can record would fail every call. The rule is deliberately looser
// than a provider's (OpenAI takes [a-zA-Z0-9_-]{1,64}; MCP servers use dots
// and slashes): the registry refuses what is broken everywhere, and an
// endpoint refuses what it does not take.
func (s ToolSpec) Validate() error {
	if problem := toolNameProblem(s.Name); problem != "" {
		return &ToolError{Tool: s.Name, Err: ErrInvalidToolSpec, Problem: problem}
	}
	if len(s.Parameters) > 0 {
		if !json.Valid(s.Parameters) {
			return &ToolError{Tool: s.Name, Err: ErrInvalidToolSpec, Problem: "parameters schema is not valid JSON"}
		}
		// A tool's arguments are a JSON object (keyhash refuses any other
		// value), so their schema is one too; chat-completions endpoints
		// refuse any other, and a model client could then send no request
		// at all while the tool is registered.
		if trimmed := bytes.TrimLeft(s.Parameters, " \t\r\n"); trimmed[0] != '{' {
			return &ToolError{Tool: s.Name, Err: ErrInvalidToolSpec, Problem: "parameters schema is not a JSON object"}
		}
	}
	return nil
}

// toolNameProblem says what is wrong with a tool name, or returns "".
func toolNameProblem(name string) string {
	switch {
	case name == "":
		return "empty name"
	case len(name) > MaxToolNameBytes:
		return fmt.Sprintf("name of %d bytes is over MaxToolNameBytes (%d)", len(name), MaxToolNameBytes)
	case !utf8.ValidString(name):
		return "name is not valid UTF-8"
	}
	for i, r := range name {
		if unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp) {
			return fmt.Sprintf("name holds the invisible or control character %U at byte %d", r, i)
		}
	}
	return ""
}

// Allow restricts the tools that may run to names (the allow-list). Names
// that are not registered (yet) are kept: registering them later makes them
// allowed. Allow with no names allows nothing; each call replaces the list.
func (r *Registry) Allow(names ...string) {
	allowed := make(map[string]bool, len(names))
	for _, n := range names {
		allowed[n] = true
	}
	r.mu.Lock()
	r.allowed = allowed
	r.mu.Unlock()
}

// Check reports whether tool may run: nil, or a *ToolError wrapping
// ErrUnknownTool or ErrToolNotAllowed.
func (r *Registry) Check(tool string) error {
	r.mu.RLock()
	defer r.mu.RUnlock()
	_, err := r.lookupLocked(tool)
	return err
}

func (r *Registry) lookupLocked(tool string) (registered, error) {
	t, ok := r.tools[tool]
	if !ok {
		return registered{}, &ToolError{Tool: tool, Err: ErrUnknownTool}
	}
	if r.allowed != nil && !r.allowed[tool] {
		return registered{}, &ToolError{Tool: tool, Err: ErrToolNotAllowed}
	}
	return t, nil
}

// Specs returns the specs of the allowed tools in registration order: what
// the model is offered.
func (r *Registry) Specs() []ToolSpec {
	r.mu.RLock()
	defer r.mu.RUnlock()
	specs := make([]ToolSpec, 0, len(r.order))
	for _, name := range r.order {
		if r.allowed == nil || r.allowed[name] {
			specs = append(specs, r.tools[name].spec)
		}
	}
	return specs
}

// Execute dispatches call to its tool's executor. An unknown or not-allowed
// tool is refused with a *ToolError and nothing runs; to an idempotent
// executor around the registry that is a failure, so it is never stored.
func (r *Registry) Execute(ctx context.Context, call executor.Call) (executor.Result, error) {
	r.mu.RLock()
	t, err := r.lookupLocked(call.Tool)
	r.mu.RUnlock()
	if err != nil {
		return executor.Result{}, err
	}
	return t.exec.Execute(ctx, call)
}

// Reconcile passes the executor's question "did this call's side effect
// already happen?" on to the tool, when the tool can tell (implements
// executor.Reconciler). For a tool that cannot tell it returns
// executor.ErrCannotReconcile, so that the executor handles the call as for
// a tool without a reconciler; "not found" would claim that the side effect
// did not happen, and an unknown outcome's claim would be released for the
// call to run again at once. Without this the registry, sitting between
// executor.Idempotent and the tools, would hide every tool's reconciler.
func (r *Registry) Reconcile(ctx context.Context, call executor.Call) (executor.Result, bool, error) {
	r.mu.RLock()
	t, err := r.lookupLocked(call.Tool)
	r.mu.RUnlock()
	if err != nil {
		return executor.Result{}, false, err
	}
	rec, ok := t.exec.(executor.Reconciler)
	if !ok {
		return executor.Result{}, false, executor.ErrCannotReconcile
	}
	return rec.Reconcile(ctx, call)
}

var (
	_ executor.Executor   = (*Registry)(nil)
	_ executor.Reconciler = (*Registry)(nil)
)
