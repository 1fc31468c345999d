package mcptools

import (
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemstore/idemstore/contract"
)

// ErrNeedsInput: the server answered a tools/call with a result that asks
// for more input (elicitation, sampling, roots) before the tool can act.
// Such a result is never stored (see NeedsInputError).
var ErrNeedsInput = errors.New("mcptools: the tool needs more input")

// NeedsInputError carries a result that asks for more input. It is an
// error so that no idempotent executor stores it: the call is not done,
// and its retry with the input must reach the server. A proxy hands Result
// to its client, which answers the input requests and calls again.
type NeedsInputError struct {
	Tool   string
	Result *mcp.CallToolResult
}

func (e *NeedsInputError) Error() string {
	n := 0
	if e.Result != nil {
		n = len(e.Result.InputRequests)
	}
	return fmt.Sprintf("mcptools: tool %s needs more input (%d input requests); its result is not stored",
		contract.Quote(e.Tool), n)
}

// Unwrap makes errors.Is(err, ErrNeedsInput) true.
func (e *NeedsInputError) Unwrap() error { return ErrNeedsInput }
