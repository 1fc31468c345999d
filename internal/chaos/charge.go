package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/idemstore/idemstore/examples/downstreamkey"
	"github.com/idemstore/idemstore/executor"
)

// chargeTimeout bounds one request to the payments API.
const chargeTimeout = 2 * time.Second

// chargeTool is the downstream-key example under chaos: the example's
// ChargeTool (examples/downstreamkey), which sends the call's downstream key
// as Idempotency-Key and reconciles a taken-over call by looking the charge
// up, with the suite's fail points around it. The API (chargeAPI, in the
// supervisor) loses some responses after charging, so the tool errs with
// the charge made, the executor releases the call, and the next caller
// charges again under the same key: the API must answer with the first
// charge. A worker killed after the charge leaves the claim to be taken
// over, and the executor reconciles before running the tool again.
type chargeTool struct {
	env   *toolEnv
	inner *downstreamkey.ChargeTool
}

var (
	_ executor.Executor   = chargeTool{}
	_ executor.Reconciler = chargeTool{}
)

// newChargeTool returns the chaos charge tool on the API at baseURL. Under
// FaultFreshDownstreamKey its requests carry a key of their own per claim
// instead of the call's downstream key.
func newChargeTool(env *toolEnv, baseURL string, f Fault) chargeTool {
	// A new connection per request: Go's transport resends a request with an
	// Idempotency-Key by itself when a reused connection breaks before the
	// response, which would hide most lost responses from the executor.
	var rt http.RoundTripper = &http.Transport{DisableKeepAlives: true}
	if f == FaultFreshDownstreamKey {
		rt = freshKeyTransport{rt}
	}
	return chargeTool{env: env, inner: &downstreamkey.ChargeTool{
		BaseURL: baseURL,
		Client:  &http.Client{Transport: rt, Timeout: chargeTimeout},
	}}
}

// Execute charges through the example tool; an error (a lost response, or
// the API unreachable) leaves the charge unknown and the call released.
func (t chargeTool) Execute(ctx context.Context, call executor.Call) (executor.Result, error) {
	info, ok := executor.CallInfoFrom(ctx)
	if !ok || info.Claim.Token == 0 {
		return executor.Result{}, &toolError{errors.New("charge without a claim")}
	}
	key := info.Key.String()
	t.env.kills.hit(AfterClaim, info.Scope, key, info.Claim.Token)
	if rand.Float64() < failShare {
		return executor.Result{}, &toolError{errors.New("injected failure before the charge")}
	}
	res, err := t.inner.Execute(ctx, call)
	if err != nil {
		return res, &toolError{err}
	}
	t.env.kills.hit(AfterEffect, info.Scope, key, info.Claim.Token)
	return res, nil
}

// Reconcile is the example tool's: the charge made under the call's
// downstream key, if any.
func (t chargeTool) Reconcile(ctx context.Context, call executor.Call) (executor.Result, bool, error) {
	return t.inner.Reconcile(ctx, call)
}

// freshKeyTransport breaks the example on purpose (FaultFreshDownstreamKey):
// it replaces the Idempotency-Key of every request by the downstream key
// suffixed with the claim's token, as a tool that made up a key per attempt
// would. A call run again under a new claim then charges again.
type freshKeyTransport struct{ next http.RoundTripper }

func (f freshKeyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	info, ok := executor.CallInfoFrom(r.Context())
	if !ok || r.Method != http.MethodPost {
		return f.next.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	r.Header.Set(downstreamkey.IdempotencyKeyHeader, fmt.Sprintf("%s-%d", info.DownstreamKey, info.Claim.Token))
	return f.next.RoundTrip(r)
}
