package mcptools

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/executor"
	agent "github.com/idemstore/idemstore/runtime"
)

// RegisterOptions tunes Register. A nil *RegisterOptions means the defaults.
type RegisterOptions struct {
	// Prefix is put before each tool's name in the registry, so that the
	// tools of several servers can share one registry ("github_" makes the
	// server's "search" the model's "github_search"). The call's key
	// holds the registry's name. Defaults to none.
	Prefix string
}

// Register lists the tools of the server behind session (ListTools) and
// registers each in reg: its name (after opts.Prefix), its description and
// its input schema as the tool's parameters, and an executor that calls it
// through a Caller. Give reg to the runtime with a store, and a retried
// run replays its MCP calls like local ones.
//
// It returns the specs it registered, in the server's order. The specs are
// checked before any is registered (a name the server lists twice, or one
// runtime.ToolSpec.Validate refuses, with the prefix: empty, too long, a
// control character); a name already in reg stops the registration there, with the
// tools before it registered (see runtime.Registry.Register).
func Register(ctx context.Context, reg *agent.Registry, session *mcp.ClientSession, opts *RegisterOptions) ([]agent.ToolSpec, error) {
	if err := contract.CheckContext(ctx); err != nil {
		return nil, err
	}
	if reg == nil {
		return nil, &contract.InputError{Field: "registry", Problem: "nil"}
	}
	c, err := NewCaller(session)
	if err != nil {
		return nil, err
	}
	if opts == nil {
		opts = &RegisterOptions{}
	}
	tools, err := ListTools(ctx, session)
	if err != nil {
		return nil, err
	}
	specs := make([]agent.ToolSpec, 0, len(tools))
	seen := make(map[string]bool, len(tools))
	for _, t := range tools {
		if t.Name == "" {
			return nil, &agent.ToolError{Tool: t.Name, Err: agent.ErrInvalidToolSpec, Problem: "empty name (the server lists a tool without one)"}
		}
		if seen[t.Name] {
			return nil, fmt.Errorf("mcptools: the server lists the tool %s twice", contract.Quote(t.Name))
		}
		seen[t.Name] = true
		params, _ := t.InputSchema.(json.RawMessage) // ListTools gives raw schemas, or nil
		spec := agent.ToolSpec{Name: opts.Prefix + t.Name, Description: t.Description, Parameters: params}
		// Checked here, not only by reg.Register: a spec refused there
		// would leave the tools before it registered.
		if err := spec.Validate(); err != nil {
			return nil, err
		}
		specs = append(specs, spec)
	}
	for i, spec := range specs {
		if err := reg.Register(spec, &serverTool{caller: c, name: tools[i].Name}); err != nil {
			return specs[:i], err
		}
	}
	return specs, nil
}

// serverTool is one server tool as the registry knows it: the Caller and
// the server's name of the tool.
type serverTool struct {
	caller *Caller
	name   string
}

func (t *serverTool) Execute(ctx context.Context, call executor.Call) (executor.Result, error) {
	return t.caller.call(ctx, t.name, call)
}
