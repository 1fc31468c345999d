package mcptools

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemstore/idemstore/contract"
)

// Prompts and resources are reads, so the proxy passes them through as
// they are: nothing is stored, every request reaches the upstream. Their
// _meta is forwarded without the reserved keys, like a tool call's.

// A list entry that is null is refused as toolsOf refuses a null tool: the
// SDK yields it as a nil pointer, which its Add methods and the warning
// that names the entry would dereference, crashing NewProxy.

func (p *Proxy) addPrompts(ctx context.Context) error {
	return eachListed(p, "prompts/list", "prompt", func(cursor string) ([]*mcp.Prompt, string, error) {
		res, err := p.upstream.ListPrompts(ctx, &mcp.ListPromptsParams{Cursor: cursor})
		if err != nil {
			return nil, "", err
		}
		return res.Prompts, res.NextCursor, nil
	}, func(prompt *mcp.Prompt) {
		if err := guard(func() { p.server.AddPrompt(prompt, p.getPrompt) }); err != nil {
			p.log.Warn("mcpproxy: the upstream's prompt cannot be served; left out", slog.String("prompt", prompt.Name), slog.Any("error", err))
		}
	})
}

func (p *Proxy) getPrompt(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	params := *req.Params
	params.Meta = forwardMeta(params.Meta, "")
	res, err := p.upstream.GetPrompt(ctx, &params)
	if err != nil {
		return nil, err
	}
	res.Meta = withoutReserved(res.Meta)
	return res, nil
}

func (p *Proxy) addResources(ctx context.Context) error {
	err := eachListed(p, "resources/list", "resource", func(cursor string) ([]*mcp.Resource, string, error) {
		res, err := p.upstream.ListResources(ctx, &mcp.ListResourcesParams{Cursor: cursor})
		if err != nil {
			return nil, "", err
		}
		return res.Resources, res.NextCursor, nil
	}, func(res *mcp.Resource) {
		if err := guard(func() { p.server.AddResource(res, p.readResource) }); err != nil {
			p.log.Warn("mcpproxy: the upstream's resource cannot be served; left out", slog.String("uri", res.URI), slog.Any("error", err))
		}
	})
	if err != nil {
		return err
	}
	return eachListed(p, "resources/templates/list", "resource template", func(cursor string) ([]*mcp.ResourceTemplate, string, error) {
		res, err := p.upstream.ListResourceTemplates(ctx, &mcp.ListResourceTemplatesParams{Cursor: cursor})
		if err != nil {
			return nil, "", err
		}
		return res.ResourceTemplates, res.NextCursor, nil
	}, func(tmpl *mcp.ResourceTemplate) {
		if err := guard(func() { p.server.AddResourceTemplate(tmpl, p.readResource) }); err != nil {
			p.log.Warn("mcpproxy: the upstream's resource template cannot be served; left out",
				slog.String("uri_template", tmpl.URITemplate), slog.Any("error", err))
		}
	})
}

func (p *Proxy) readResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	params := *req.Params
	params.Meta = forwardMeta(params.Meta, "")
	res, err := p.upstream.ReadResource(ctx, &params)
	if err != nil {
		return nil, err
	}
	res.Meta = withoutReserved(res.Meta)
	return res, nil
}

// methodNotFound reports whether err is the upstream's JSON-RPC "method not
// found": a server that declares prompts or resources need not implement
// every list of them (resources/templates/list most often), and one without
// tools may not answer tools/list. The proxy then serves none of that kind
// instead of refusing to start.
func methodNotFound(err error) bool {
	var w *jsonrpc.Error
	return errors.As(err, &w) && w.Code == jsonrpc.CodeMethodNotFound
}

// logNotListed says which list the upstream does not implement.
func (p *Proxy) logNotListed(method string, err error) {
	p.log.Info("mcpproxy: the upstream does not implement "+method+"; serving none", slog.Any("error", err))
}

// eachListed reads every page of the upstream's list method (page returns
// one page's entries and its next cursor) and hands each entry to add. It
// reads at most maxListPages pages and refuses a cursor the upstream gave
// before, as ListTools does: a server that pages forever kept the proxy
// from starting, sending requests without end. An upstream that does not
// implement the method (methodNotFound) lists nothing.
func eachListed[T any](p *Proxy, method, what string, page func(cursor string) ([]*T, string, error), add func(*T)) error {
	seen := make(map[string]bool)
	cursor, i := "", 0
	for n := 0; ; n++ {
		if n == maxListPages {
			return fmt.Errorf("mcptools: %s: more than %d pages", method, maxListPages)
		}
		entries, next, err := page(cursor)
		if methodNotFound(err) {
			p.logNotListed(method, err)
			return nil
		}
		if err != nil {
			return fmt.Errorf("mcptools: %s: %w", method, withoutURLSecrets(err))
		}
		for _, e := range entries {
			if e == nil {
				return fmt.Errorf("mcptools: %s: %s %d is null", method, what, i)
			}
			i++
			add(e)
		}
		if next == "" {
			return nil
		}
		if seen[next] {
			return fmt.Errorf("mcptools: %s: the upstream repeated the cursor %s", method, contract.Quote(next))
		}
		seen[next] = true
		cursor = next
	}
}
