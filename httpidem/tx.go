package httpidem

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/internal/nilness"
	"github.com/idemstore/idemstore/store"
)

// TxStore is what storing a response inside the handler's own transaction
// needs of a store: pgstore.Store.CompleteTx, for Tx = pgx.Tx. It is
// generic so that this package does not depend on pgx; any store with a
// CompleteTx of this shape works.
type TxStore[Tx any] interface {
	CompleteTx(ctx context.Context, tx Tx, c store.Claim, out store.Outcome) (store.Record, error)
}

// Committer is a transaction CommitTx can commit (pgx.Tx is one).
type Committer interface {
	Commit(ctx context.Context) error
}

// ErrNotStorable: a handler asked to store a response the middleware's
// config does not store (a 5xx, a 4xx without Config.Store4xx, 408/425/
// 429, or an invalid status).
var ErrNotStorable = errors.New("httpidem: response not storable")

// CommitTx stores resp as the response of the idempotent request in ctx,
// inside tx, then commits tx: a handler whose side effect is a write to the
// store's own PostgreSQL database makes its write and the stored response
// commit together, so that the side effect happens exactly once whatever
// fails when (the pattern of pgstore.Store.TxTool):
//
//	tx, err := pool.Begin(ctx)           // defer tx.Rollback(ctx)
//	… insert the order in tx …
//	resp := httpidem.Response{Status: 201, Header: h, Body: body}
//	if err := httpidem.CommitTx(ctx, tx, pgStore, resp); err != nil { … 500 … }
//	resp.Write(w)
//
// A crash before the commit leaves neither the write nor the response (the
// claim's lease ends and a retry runs the handler); after it, both (a retry
// replays resp). resp's headers are cut to Config.ReplayHeaders, as the
// middleware does (line breaks in a value stored as the spaces net/http
// sends); write the same response to w. st must be the store the
// middleware was created with.
//
// A claim that was lost meanwhile (the lease ended and a retry took the key
// over) makes the store's CompleteTx fail with *store.LeaseLostError before
// the commit; CommitTx then returns that error and does not commit, and the
// handler's write rolls back with tx. When the commit fails, the record is
// read back: completed under this claim means the commit went through (nil
// is returned); otherwise CommitTx returns the commit's error, wrapping
// contract.ErrOutcomeUnknown when the read-back could not tell.
//
// A tx the store refuses as already ended (pgstore: an *InputError naming
// "tx", for a tx the handler committed or rolled back before CommitTx or
// CompleteTx) leaves the outcome unknown: the error wraps
// contract.ErrOutcomeUnknown and the claim is left to its lease, not
// released, since the handler's write may have committed.
//
// A response the middleware would not store either is refused before
// anything is written, and tx is not committed: a status it does not
// store (ErrNotStorable), or a body over Config.MaxResponseBytes or an
// encoding over the store's MaxResultBytes (*contract.LimitError).
//
// Outside an idempotent request (no key under AllowMissingKey, a method
// not covered) CommitTx only commits. A nil ctx, tx or st is refused with
// a *contract.InputError, and nothing is stored.
func CommitTx[Tx Committer](ctx context.Context, tx Tx, st TxStore[Tx], resp Response) error {
	if err := checkTxArgs(ctx, tx, st); err != nil {
		return err
	}
	r := runFrom(ctx)
	if r == nil {
		return tx.Commit(ctx)
	}
	if err := r.storeInTx(resp, func(out store.Outcome) error {
		_, err := st.CompleteTx(ctx, tx, r.info.Claim, out)
		return err
	}); err != nil {
		return err
	}
	err := tx.Commit(ctx)
	if err == nil {
		r.stored.Store(storedCommitted)
		return nil
	}
	// The acknowledgement may be lost after the commit happened: ask the
	// store, never guess.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), outcomeTimeout)
	defer cancel()
	rec, gerr := r.m.st.Get(rctx, r.info.Scope, r.info.Entry.Key)
	switch {
	case gerr == nil && rec.Token == r.info.Claim.Token:
		r.stored.Store(storedCommitted)
		return nil
	case gerr == nil || errors.Is(gerr, store.ErrNotFound):
		r.stored.Store(storedFailed)
		return fmt.Errorf("httpidem: commit: %w", err)
	}
	r.stored.Store(storedUnknown)
	return fmt.Errorf("httpidem: commit: %w: %w", contract.ErrOutcomeUnknown, err)
}

// CompleteTx stores resp as the response of the idempotent request in ctx,
// inside tx, for a handler that commits tx itself. When the handler
// returns, the middleware reads the record back (one round trip) to learn
// whether tx committed, and releases the claim if it did not. Prefer
// CommitTx, which knows. resp's headers are cut to Config.ReplayHeaders;
// write the same response to w. A response CommitTx refuses is refused
// here too, with nothing written into tx. Outside an idempotent request it does
// nothing. A nil ctx, tx or st is refused with a *contract.InputError,
// and nothing is stored.
func CompleteTx[Tx any](ctx context.Context, tx Tx, st TxStore[Tx], resp Response) error {
	if err := checkTxArgs(ctx, tx, st); err != nil {
		return err
	}
	r := runFrom(ctx)
	if r == nil {
		return nil
	}
	return r.storeInTx(resp, func(out store.Outcome) error {
		_, err := st.CompleteTx(ctx, tx, r.info.Claim, out)
		return err
	})
}

// checkTxArgs refuses a nil context, transaction or store (also a typed
// nil): a method called on it would panic inside the handler.
func checkTxArgs(ctx context.Context, tx, st any) error {
	switch {
	case ctx == nil:
		return contract.CheckContext(ctx)
	case nilness.IsNil(tx):
		return &contract.InputError{Field: "tx", Problem: "nil"}
	case nilness.IsNil(st):
		return &contract.InputError{Field: "st", Problem: "nil"}
	}
	return nil
}

// storeInTx stores resp under the request's claim with complete (the
// store's CompleteTx in the handler's transaction). After a failure the
// middleware releases the claim, whatever the handler then writes: its
// transaction cannot commit the response.
func (r *run) storeInTx(resp Response, complete func(store.Outcome) error) error {
	if s := r.stored.Load(); s != storedNone {
		return &contract.InputError{Field: "response", Problem: "already stored for this request"}
	}
	if !r.m.cfg.storable(resp.Status) {
		return fmt.Errorf("%w: status %d", ErrNotStorable, resp.Status)
	}
	// The bound the recorder puts on a body written to w holds for one
	// stored here too: otherwise a response the middleware would not store
	// is stored and replayed because the handler stored it itself.
	if len(resp.Body) > r.m.cfg.maxResponse {
		return &contract.LimitError{Limit: "MaxResponseBytes", Value: len(resp.Body), Max: r.m.cfg.maxResponse}
	}
	// Cut as the recorder cuts a response: the allow-listed headers, under
	// their canonical names, with line breaks as net/http sends them
	// (spaces). Spellings of one name join in the order Write sends them.
	kept := Response{Status: resp.Status, Header: make(http.Header, len(resp.Header)), Body: resp.Body}
	names, header := canonicalHeader(resp.Header)
	for _, cn := range names {
		if !r.m.cfg.replayHeaders[cn] {
			continue
		}
		for _, v := range header[cn] {
			kept.Header[cn] = append(kept.Header[cn], headerNewlineToSpace.Replace(v))
		}
	}
	out, err := kept.Encode()
	if err != nil {
		return err
	}
	if len(out) > r.m.cfg.maxResult {
		return &contract.LimitError{Limit: "MaxResultBytes", Value: len(out), Max: r.m.cfg.maxResult}
	}
	kind := store.KindSuccess
	if resp.Status >= 400 {
		kind = store.KindPermanentFailure
	}
	if err := complete(store.Outcome{Kind: kind, Result: out}); err != nil {
		var ie *contract.InputError
		if errors.As(err, &ie) && ie.Field == "tx" {
			// The store refused tx itself (pgstore: already committed or
			// rolled back): the handler ended it before handing it over,
			// and its write may have committed without the response.
			// Releasing the claim would run the handler again; it is left
			// to its lease instead.
			r.stored.Store(storedUnknown)
			return fmt.Errorf("httpidem: %w: %w", contract.ErrOutcomeUnknown, err)
		}
		r.stored.Store(storedFailed)
		return err
	}
	r.said.Store(&kept)
	r.stored.Store(storedInTx)
	return nil
}
