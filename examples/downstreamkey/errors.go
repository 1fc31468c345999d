package downstreamkey

import (
	"errors"
	"fmt"
	"strings"
)

// ErrNoDownstreamKey reports that ChargeTool was called outside an
// idempotent call, where the context carries no downstream key. The tool
// then refuses to charge: a charge without a key could never be recognised
// on a retry, which is the whole point of the tool.
var ErrNoDownstreamKey = errors.New("downstreamkey: no downstream key in the context: run the tool through an idempotent executor (executor.New)")

// maxErrorBody bounds how much of a response body a StatusError keeps: enough
// to read the API's error message in a log, not a whole page.
const maxErrorBody = 256

// StatusError reports an HTTP status the tool cannot turn into a result: a
// 5xx, a 409 (a request with the same key still in progress), a 429, or any
// other status than 2xx and 422 (and 404 for a lookup). It is returned as an
// error, so the executor stores nothing and the call is asked again later;
// the same downstream key makes that safe even if the API acted.
type StatusError struct {
	Op         string // "charge" or "lookup"
	StatusCode int
	Body       string // the start of the response body
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("downstreamkey: %s: unexpected HTTP status %d: %s", e.Op, e.StatusCode, e.Body)
}

// newStatusError keeps at most maxErrorBody bytes of body, as valid UTF-8.
func newStatusError(op string, status int, body []byte) *StatusError {
	if len(body) > maxErrorBody {
		body = body[:maxErrorBody]
	}
	// A cut may split a UTF-8 sequence; drop the broken tail.
	return &StatusError{Op: op, StatusCode: status, Body: strings.ToValidUTF8(string(body), "")}
}
