package downstreamkey

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/executor"
	"github.com/idemstore/idemstore/store"
)

// IdempotencyKeyHeader is the request header that carries the downstream
// key. Stripe and Adyen, among others, deduplicate on it; the IETF draft
// "The Idempotency-Key HTTP Header Field" standardises the name. (Some APIs
// take the key under another name, PayPal's PayPal-Request-Id for one.)
const IdempotencyKeyHeader = "Idempotency-Key"

// MaxResponseBytes bounds the response body the tool reads. It equals the
// stores' default result limit, so whatever the tool returns can be stored.
const MaxResponseBytes = contract.DefaultMaxResultBytes

// ChargeTool charges a customer through a payments API that deduplicates on
// the Idempotency-Key header (see Server for one). Every request carries the
// call's downstream key (executor.DownstreamKey), which is the same on every
// retry, takeover and process restart of the call: however often the tool
// runs for one call, the API charges once and answers the later requests
// with the first charge.
//
// It implements executor.Reconciler too: before re-running a call whose
// earlier holder died (its outcome unknown), the executor asks the API
// whether a charge with the call's key exists, and stores that charge
// instead of running the tool.
//
// Run it only through an idempotent executor (executor.New): outside one
// there is no downstream key and it refuses with ErrNoDownstreamKey.
//
// A ChargeTool is safe for concurrent use once its fields are set.
type ChargeTool struct {
	// BaseURL is the API's root URL, for example
	// "https://payments.example.com/v1"; the tool posts to BaseURL/charges
	// and looks charges up at BaseURL/charges/{key}. Required.
	BaseURL string
	// Client sends the requests. Defaults to http.DefaultClient, which has
	// no timeout: give yours one, or bound the call's context, so that a
	// hung API cannot hold the call's claim forever.
	Client *http.Client
}

var (
	_ executor.Executor   = (*ChargeTool)(nil)
	_ executor.Reconciler = (*ChargeTool)(nil)
)

// Execute posts the call's arguments to BaseURL/charges with the call's
// downstream key in the Idempotency-Key header.
//
//   - 2xx: the charge (made now, or replayed by the API for this key) is the
//     result, to be stored;
//   - 422: the API refused the charge for good (invalid parameters, or the
//     key reused with other parameters): a permanent failure;
//   - a transport error (timeout, connection lost), a 5xx or any other
//     status: an error, since the charge may or may not have happened. The
//     executor stores nothing and releases the call, and the next call runs
//     the tool again with the same key, which the API recognises.
func (t *ChargeTool) Execute(ctx context.Context, call executor.Call) (executor.Result, error) {
	key, base, err := t.prepare(ctx)
	if err != nil {
		return executor.Result{}, err
	}
	body := []byte(call.Args)
	if len(body) == 0 {
		body = []byte("{}") // absent arguments are {} (see keyhash)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/charges", bytes.NewReader(body))
	if err != nil {
		return executor.Result{}, fmt.Errorf("downstreamkey: charge: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(IdempotencyKeyHeader, key)
	status, out, err := t.do(req)
	if err != nil {
		return executor.Result{}, fmt.Errorf("downstreamkey: charge: the charge may or may not have happened: %w", err)
	}
	switch {
	case status >= 200 && status < 300:
		return executor.Result{Output: out}, nil
	case status == http.StatusUnprocessableEntity:
		return executor.Result{Output: out, Failed: true, Permanent: true}, nil
	}
	return executor.Result{}, newStatusError("charge", status, out)
}

// Reconcile asks the API for the charge made with the call's downstream key
// (GET BaseURL/charges/{key}): 200 means the side effect happened, and its
// body is the result to store; 404 means it did not, and the executor runs
// the tool. Anything else is an error: the executor then runs nothing and
// leaves the call to be asked again.
//
// Only successful charges can be found: a refused one (422) was not a side
// effect, and running the tool again gets the same refusal.
func (t *ChargeTool) Reconcile(ctx context.Context, _ executor.Call) (executor.Result, bool, error) {
	key, base, err := t.prepare(ctx)
	if err != nil {
		return executor.Result{}, false, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/charges/"+url.PathEscape(key), nil)
	if err != nil {
		return executor.Result{}, false, fmt.Errorf("downstreamkey: lookup: %w", err)
	}
	status, out, err := t.do(req)
	if err != nil {
		return executor.Result{}, false, fmt.Errorf("downstreamkey: lookup: %w", err)
	}
	switch status {
	case http.StatusOK:
		return executor.Result{Output: out}, true, nil
	case http.StatusNotFound:
		return executor.Result{}, false, nil
	}
	return executor.Result{}, false, newStatusError("lookup", status, out)
}

// prepare checks the tool's configuration and returns the call's downstream
// key and the base URL without its trailing slash. Nothing is sent when it
// fails.
func (t *ChargeTool) prepare(ctx context.Context) (key, base string, err error) {
	u, perr := url.Parse(t.BaseURL)
	switch {
	case t.BaseURL == "":
		return "", "", &store.InputError{Field: "charge tool base URL", Problem: "empty"}
	case perr != nil:
		return "", "", &store.InputError{Field: "charge tool base URL", Problem: "not a URL"}
	case (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return "", "", &store.InputError{Field: "charge tool base URL", Problem: "not an absolute http(s) URL"}
	}
	key = executor.DownstreamKey(ctx)
	if key == "" {
		return "", "", ErrNoDownstreamKey
	}
	return key, strings.TrimRight(t.BaseURL, "/"), nil
}

// do sends req and returns the status and at most MaxResponseBytes of body.
func (t *ChargeTool) do(req *http.Request) (int, []byte, error) {
	client := t.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		return 0, nil, err
	}
	if len(body) > MaxResponseBytes {
		return 0, nil, fmt.Errorf("response body over %d bytes", MaxResponseBytes)
	}
	return resp.StatusCode, body, nil
}
