package mcptools

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Prompts and resources are reads, so the proxy passes them through as
// they are: nothing is stored, every request reaches the upstream. Their
// _meta is forwarded without the reserved keys, like a tool call's.

// A list entry that is null is refused as toolsOf refuses a null tool: the
// SDK yields it as a nil pointer, which its Add methods and the warning
// that names the entry would dereference, crashing NewProxy.

func (p *Proxy) addPrompts(ctx context.Context) error {
	i := 0
	for prompt, err := range p.upstream.Prompts(ctx, nil) {
		if methodNotFound(err) {
			p.logNotListed("prompts/list", err)
			break
		}
		if err != nil {
			return fmt.Errorf("mcptools: prompts/list: %w", err)
		}
		if prompt == nil {
			return fmt.Errorf("mcptools: prompts/list: prompt %d is null", i)
		}
		i++
		if err := guard(func() { p.server.AddPrompt(prompt, p.getPrompt) }); err != nil {
			p.log.Warn("mcpproxy: the upstream's prompt cannot be served; left out", slog.String("prompt", prompt.Name), slog.Any("error", err))
		}
	}
	return nil
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
	i := 0
	for res, err := range p.upstream.Resources(ctx, nil) {
		if methodNotFound(err) {
			p.logNotListed("resources/list", err)
			break
		}
		if err != nil {
			return fmt.Errorf("mcptools: resources/list: %w", err)
		}
		if res == nil {
			return fmt.Errorf("mcptools: resources/list: resource %d is null", i)
		}
		i++
		if err := guard(func() { p.server.AddResource(res, p.readResource) }); err != nil {
			p.log.Warn("mcpproxy: the upstream's resource cannot be served; left out", slog.String("uri", res.URI), slog.Any("error", err))
		}
	}
	i = 0
	for tmpl, err := range p.upstream.ResourceTemplates(ctx, nil) {
		if methodNotFound(err) {
			p.logNotListed("resources/templates/list", err)
			break
		}
		if err != nil {
			return fmt.Errorf("mcptools: resources/templates/list: %w", err)
		}
		if tmpl == nil {
			return fmt.Errorf("mcptools: resources/templates/list: resource template %d is null", i)
		}
		i++
		if err := guard(func() { p.server.AddResourceTemplate(tmpl, p.readResource) }); err != nil {
			p.log.Warn("mcpproxy: the upstream's resource template cannot be served; left out",
				slog.String("uri_template", tmpl.URITemplate), slog.Any("error", err))
		}
	}
	return nil
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
