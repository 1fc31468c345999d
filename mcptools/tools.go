package mcptools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemstore/idemstore/contract"
)

// maxListPages bounds the pages of one tools/list, so that a server that
// keeps answering with a next cursor cannot keep a caller forever.
const maxListPages = 1000

// ListTools lists every tool of the server behind session, following the
// pages of tools/list. On a session from Connect over a transport it wraps,
// each tool's InputSchema and OutputSchema are the server's bytes, as a
// json.RawMessage; otherwise they are the SDK's decoding, re-encoded.
func ListTools(ctx context.Context, session *mcp.ClientSession) ([]*mcp.Tool, error) {
	if err := contract.CheckContext(ctx); err != nil {
		return nil, err
	}
	if session == nil {
		return nil, &contract.InputError{Field: "session", Problem: "nil"}
	}
	var tools []*mcp.Tool
	seen := make(map[string]bool)
	params := &mcp.ListToolsParams{}
	for page := 0; ; page++ {
		if page == maxListPages {
			return nil, fmt.Errorf("mcptools: tools/list: more than %d pages", maxListPages)
		}
		rctx, slot := withRawSlot(ctx)
		res, err := session.ListTools(rctx, params)
		raw := slot.done()
		if err != nil {
			return nil, fmt.Errorf("mcptools: tools/list: %w", withoutURLSecrets(err))
		}
		listed, err := toolsOf(raw, res)
		if err != nil {
			return nil, err
		}
		tools = append(tools, listed...)
		if res.NextCursor == "" {
			return tools, nil
		}
		if seen[res.NextCursor] {
			return nil, fmt.Errorf("mcptools: tools/list: the server repeated the cursor %s", contract.Quote(res.NextCursor))
		}
		seen[res.NextCursor] = true
		params = &mcp.ListToolsParams{Cursor: res.NextCursor}
	}
}

// toolsOf returns the tools of one tools/list page: res's, with the
// schemas taken from raw when raw is there.
func toolsOf(raw []byte, res *mcp.ListToolsResult) ([]*mcp.Tool, error) {
	var schemas struct {
		Tools []struct {
			Name         string          `json:"name"`
			InputSchema  json.RawMessage `json:"inputSchema"`
			OutputSchema json.RawMessage `json:"outputSchema"`
		} `json:"tools"`
	}
	if raw != nil {
		if err := json.Unmarshal(raw, &schemas); err != nil {
			return nil, fmt.Errorf("mcptools: tools/list: %w", err)
		}
		if len(schemas.Tools) != len(res.Tools) {
			return nil, fmt.Errorf("mcptools: tools/list: %d raw tools for %d decoded ones", len(schemas.Tools), len(res.Tools))
		}
	}
	tools := make([]*mcp.Tool, 0, len(res.Tools))
	for i, t := range res.Tools {
		if t == nil {
			return nil, fmt.Errorf("mcptools: tools/list: tool %d is null", i)
		}
		tool := *t
		if raw != nil {
			s := schemas.Tools[i]
			tool.InputSchema = rawOrNil(s.InputSchema)
			tool.OutputSchema = rawOrNil(s.OutputSchema)
		} else {
			var err error
			if tool.InputSchema, err = reencode(t.InputSchema); err != nil {
				return nil, fmt.Errorf("mcptools: tool %s: input schema: %w", contract.Quote(t.Name), err)
			}
			if tool.OutputSchema, err = reencode(t.OutputSchema); err != nil {
				return nil, fmt.Errorf("mcptools: tool %s: output schema: %w", contract.Quote(t.Name), err)
			}
		}
		tools = append(tools, &tool)
	}
	return tools, nil
}

// rawOrNil returns b as a schema, or nil (an untyped nil, which the SDK
// treats as absent) when there is none.
func rawOrNil(b json.RawMessage) any {
	if len(b) == 0 || bytes.Equal(b, []byte("null")) {
		return nil
	}
	return b
}

// reencode returns a decoded schema as JSON bytes, nil for none.
func reencode(v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return rawOrNil(b), nil
}
