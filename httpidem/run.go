package httpidem

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/idemstore/idemstore/store"
)

// run runs the handler under the claim cr granted, then stores its
// response and sends it, or releases the claim when the response is not
// to be stored (so that a retry runs the handler again).
func (m *Middleware) run(w http.ResponseWriter, r *http.Request, next http.Handler, req request, cr store.ClaimResult) {
	st := &run{m: m, info: RequestInfo{
		Key: req.key, Principal: req.principal, Scope: req.scope, Entry: req.ent,
		Claim: cr.Claim, TakenOver: cr.TakenOver,
	}}
	ctx := context.WithValue(r.Context(), runKey{}, st)
	rec := newRecorder(w, m.cfg.maxResponse, m.cfg.replayHeaders, r.Method == http.MethodHead)
	ren := m.startRenewal(ctx, cr.Claim)
	returned := false
	defer func() {
		if returned {
			return
		}
		// The handler panicked (or called runtime.Goexit). Nothing held
		// back is sent, and the key is left as after a handler that
		// returned: released so that a retry runs the handler again,
		// unless the handler stored its response itself first. A
		// response stored with CompleteTx is read back as on return, so
		// that a transaction the panic rolled back does not leave the
		// claim pending until its lease ends (every retry getting 409
		// meanwhile). The panic goes on to net/http, which ends the
		// connection.
		claim, _ := ren.stop()
		switch st.stored.Load() {
		case storedNone, storedFailed:
			m.release(ctx, claim, "the handler panicked")
		case storedInTx:
			m.readBack(ctx, claim, "the handler panicked")
		}
	}()
	next.ServeHTTP(rec, withBody(r, ctx, req.body))
	returned = true
	rec.end()
	claim, lost := ren.stop()
	m.settle(ctx, st, rec, claim, lost)
	rec.finish()
}

// settle stores the response the handler wrote, or releases the claim.
// Storing comes before sending: a client that got a response finds it
// stored when it retries.
func (m *Middleware) settle(ctx context.Context, st *run, rec *recorder, claim store.Claim, lost bool) {
	status, header := rec.status, rec.header
	switch st.stored.Load() {
	case storedCommitted:
		m.checkSaid(ctx, st, rec)
		return
	case storedUnknown:
		// The commit's fate is unknown: leave the claim to its lease.
		return
	case storedInTx:
		if m.readBack(ctx, claim, "the handler's transaction did not commit") {
			m.checkSaid(ctx, st, rec)
		}
		return
	case storedFailed:
		m.release(ctx, claim, "not stored: the handler's transaction did not store or commit its response")
		return
	}
	if lost {
		// Another request took the key over; whatever it does decides.
		return
	}
	switch {
	case rec.unsaved != "":
		m.release(ctx, claim, "not stored: "+rec.unsaved)
		return
	case rec.implicit && ctx.Err() != nil:
		// The handler returned without a word once the request's context
		// had ended (the client went away, the server is shutting down):
		// it gave up, and its implicit 200 is no answer to replay.
		m.release(ctx, claim, "not stored: the handler wrote nothing after the request's context ended")
		return
	case !m.cfg.storable(status):
		m.release(ctx, claim, fmt.Sprintf("not stored: status %d", status))
		return
	}
	out, err := Response{Status: status, Header: header, Body: rec.body}.Encode()
	if err == nil && len(out) > m.cfg.maxResult {
		m.release(ctx, claim, "not stored: the response with its headers is over the store's MaxResultBytes")
		return
	}
	if err != nil {
		m.release(ctx, claim, "not stored: "+err.Error())
		return
	}
	kind := store.KindSuccess
	if status >= 400 {
		kind = store.KindPermanentFailure
	}
	octx, cancel := context.WithTimeout(context.WithoutCancel(ctx), outcomeTimeout)
	defer cancel()
	if _, err := m.st.Complete(octx, claim, store.Outcome{Kind: kind, Result: out}); err != nil {
		// The response still goes out: the handler ran. A retry finds the
		// claim in flight until its lease ends, then runs the handler
		// again (RequestInfo.TakenOver set).
		m.cfg.log.LogAttrs(ctx, slog.LevelError, "httpidem: response not stored",
			slog.String("scope", claim.Scope), slog.Int64("token", claim.Token), slog.String("error", err.Error()))
	}
}

// readBack finds out whether the transaction the handler stored its
// response in (CompleteTx) committed, and reports whether it did: the
// key's record completed under this claim's token means it did. If it did
// not, the claim is released, for cause.
func (m *Middleware) readBack(ctx context.Context, claim store.Claim, cause string) bool {
	octx, cancel := context.WithTimeout(context.WithoutCancel(ctx), outcomeTimeout)
	defer cancel()
	got, err := m.st.Get(octx, claim.Scope, claim.Key)
	switch {
	case err == nil && got.Token == claim.Token:
		return true
	case err == nil:
		// Another claim completed the key: this one's lease was lost.
	case errors.Is(err, store.ErrNotFound):
		m.release(octx, claim, "not stored: "+cause)
	default:
		m.cfg.log.LogAttrs(ctx, slog.LevelWarn, "httpidem: cannot tell whether the handler's transaction committed; the claim is left to its lease",
			slog.String("scope", claim.Scope), slog.String("error", err.Error()))
	}
	return false
}

// checkSaid warns when a handler stored one response and sent another: the
// client got the one sent, every retry gets the one stored.
func (m *Middleware) checkSaid(ctx context.Context, st *run, rec *recorder) {
	said := st.said.Load()
	if said == nil || rec.unsaved != "" {
		return
	}
	if said.Status != rec.status || !bytes.Equal(said.Body, rec.body) {
		m.cfg.log.LogAttrs(ctx, slog.LevelWarn, "httpidem: the handler stored one response and sent another; retries get the stored one",
			slog.String("scope", st.info.Scope), slog.Int("stored_status", said.Status), slog.Int("sent_status", rec.status))
	}
}

// release gives the claim up, so that the next request with the key runs
// the handler. A lost lease is no failure here: someone else holds the key.
func (m *Middleware) release(ctx context.Context, c store.Claim, cause string) {
	octx, cancel := context.WithTimeout(context.WithoutCancel(ctx), outcomeTimeout)
	defer cancel()
	if err := m.st.Release(octx, c, cause); err != nil && !errors.Is(err, store.ErrLeaseLost) {
		m.cfg.log.LogAttrs(ctx, slog.LevelWarn, "httpidem: release failed; the claim ends with its lease",
			slog.String("scope", c.Scope), slog.String("error", err.Error()))
	}
}
