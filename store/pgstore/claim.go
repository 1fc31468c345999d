package pgstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
)

// nonceBytes is the size of a Claim's nonce: enough random bits that two
// Claims of one key never draw the same.
const nonceBytes = 16

// newNonce draws a Claim's nonce. math/rand/v2's generator is seeded from
// the operating system per process: unpredictable enough for an
// identifier, never for a secret (the nonce is none).
func newNonce() []byte {
	b := make([]byte, nonceBytes)
	binary.LittleEndian.PutUint64(b, rand.Uint64())
	binary.LittleEndian.PutUint64(b[8:], rand.Uint64())
	return b
}

// Claim is the exclusive mode's atomic step: it returns the completed
// record, grants a claim (a fresh one, or a takeover of a claim whose lease
// expired), or reports another caller's live claim. A record with another
// fingerprint gives *store.MismatchError and is left unchanged.
//
// A record that decides by itself (completed, claimed, another call's) is
// answered by one primary-key read (claimReadSQL), which costs what a
// SELECT costs: the hit path. Otherwise the claim is one statement
// (idem_claim, see pgsql) that decides again under the record's row lock,
// on its latest version: a miss costs one round trip more than the claim
// itself (measured: a claim function that reads first costs a replay a
// fifth more than a SELECT). With WriteOptions.LikelyNew (the executor's
// calls new to its process) the first statement is claimNewSQL instead,
// which inserts the pending record when the key has none: a new call is
// claimed in one round trip, at the cost of an INSERT (on fast disks the
// read was a third of a miss). A key it finds taken (a wrong hint, or its
// own grant whose reply was lost) is read next, and decided as above: a
// round trip more for a wrong hint, which the executor's hints make rare.
// With WriteOptions.OutcomeOnly (the executor's claims) the read returns
// only what a replay needs (claimReplaySQL: 7 columns, not 16); a dead or
// released record goes to the claim as after the whole read, and a record
// that read cannot decide (a call in flight, another call's record) is
// read again whole. Hinted LikelyNew on Citus, the claim is
// idem_claim_many of one key, delegated to the scope's worker; with
// ConfirmReads both hints are ignored (the read must lock, and so wait for
// the standby).
//
// Each Claim draws a nonce that the claim it is granted records. When the
// connection fails after the statement was sent (the grant may have been
// committed and its reply lost), the statement is sent again with the same
// nonce, and the database hands the same claim back instead of reporting
// it in flight until its lease ends.
//
// A completed record whose result does not open (a *seal.OpenError, see
// Config.Sealer) is neither replayed nor claimed over: Claim returns the
// error and changes nothing.
func (s *Store) Claim(ctx context.Context, scope string, e store.Entry, lease time.Duration, opts store.WriteOptions) (store.ClaimResult, error) {
	if err := s.checkWrite(ctx, scope, opts, e); err != nil {
		return store.ClaimResult{}, err
	}
	if err := store.CheckDuration("lease", lease); err != nil {
		return store.ClaimResult{}, err
	}
	likelyNew := opts.LikelyNew && !s.confirmReads // ConfirmReads: the read must wait for the standby
	if likelyNew && s.citus.distributed {
		// One function call that reads and claims (idem_claim_many),
		// delegated to the scope's worker like every claim on Citus.
		rs, err := s.claimMany(ctx, scope, []store.Entry{e}, lease, opts)
		if err != nil {
			return store.ClaimResult{}, err
		}
		return rs[0], rs[0].Err
	}
	var (
		won   bool
		prior pgtype.Int2
		row   recordScan
	)
	outcomeOnly := opts.OutcomeOnly && !s.confirmReads // ConfirmReads: the confirmed read is claimReadSQL's
	nonce := newNonce()
	ttl := micros(opts.TTL(s.defaultTTL))
	// Sent again whatever happened to the connection: the nonce makes a
	// second run hand back what the first one granted.
	err := s.do(ctx, "claim", rerunAlways, func(conn *pgxpool.Conn) error {
		var err error
		if likelyNew {
			// The insert of a new record (claimNewSQL); no row: the key
			// has a record, which the read decides from.
			err = queryRow(ctx, conn, s.sql.ClaimNew,
				[]any{scope, e.Key[:], e.Tool, e.Fingerprint[:], micros(lease), ttl, nonce},
				&row.token, &row.leaseUntil, &row.createdAt, &row.expiresAt)
			if err == nil {
				row.setInserted(e)
				prior, won = pgtype.Int2{}, true
				return nil
			}
			if !isNoRows(err) {
				return err
			}
		}
		var decides bool
		prior, decides, won, err = s.lookFirst(ctx, conn, scope, e, nonce, outcomeOnly, &row)
		if err != nil || decides {
			return err
		}
		return queryRow(ctx, conn, s.sql.Claim,
			[]any{scope, e.Key[:], e.Tool, e.Fingerprint[:], micros(lease), ttl, nonce},
			append([]any{&won}, row.targets()...)...)
	})
	if err != nil {
		return store.ClaimResult{}, s.translate("claim", err)
	}
	res := s.decideClaim(scope, e, won, prior, &row)
	return res, res.Err
}

// lookFirst is Claim's first look at the key, a read that decides or
// leaves the key to claimSQL (decides false; prior is the status read, the
// claim's prior, invalid for no record). With outcomeOnly the read is
// claimReplaySQL's, which decides a replay and hands row only its columns
// (store.WriteOptions.OutcomeOnly: the caller reads no more), and leaves a
// record it cannot decide to claimReadSQL's read, which hands row every
// column.
func (s *Store) lookFirst(ctx context.Context, conn *pgxpool.Conn, scope string, e store.Entry, nonce []byte, outcomeOnly bool, row *recordScan) (prior pgtype.Int2, decides, won bool, err error) {
	if outcomeOnly {
		*row = recordScan{} // no column of a read before (a run sent again) is left
		var now time.Time
		err = queryRow(ctx, conn, s.sql.ClaimReplay, []any{scope, e.Key[:]},
			&row.status, &row.fingerprint, &row.outcomeKind, &row.encoding, &row.result, &row.expiresAt, &now)
		if isNoRows(err) {
			return pgtype.Int2{}, false, false, nil
		}
		if err != nil {
			return pgtype.Int2{}, false, false, err
		}
		switch row.decideReplayLook(now, e.Fingerprint) {
		case replayLookReplays:
			return pgtype.Int2{Int16: row.status, Valid: true}, true, false, nil
		case replayLookClaims:
			return pgtype.Int2{Int16: row.status, Valid: true}, false, false, nil
		}
	}
	var look lookColumns
	err = queryRow(ctx, conn, s.sql.ClaimRead, []any{scope, e.Key[:]}, row.targets(&look.nonce, &look.now)...)
	if isNoRows(err) {
		return pgtype.Int2{}, false, false, nil
	}
	if err != nil {
		return pgtype.Int2{}, false, false, err
	}
	decides, won = row.decideFirstLook(look, e.Fingerprint, nonce)
	return pgtype.Int2{Int16: row.status, Valid: true}, decides, won, nil
}

// ClaimMany claims each entry as Claim does, after one input check of the
// whole batch: bad input in any entry refuses it before anything is
// written, and so is a batch of more than Config.MaxClaimBatch entries
// (a *store.LimitError naming MaxClaimBatch). An entry refused on its own (a
// fingerprint mismatch, a result that does not open) gets its error in
// ClaimResult.Err. With WriteOptions.LikelyNew (a turn with a call new to
// the executor) the batch is one statement: on plain PostgreSQL a set
// statement that reads the keys and inserts a pending record for each key
// that has none (claimNewManySQL), on Citus idem_claim_many. Without it the
// keys are read first, and a batch whose records all decide by themselves
// (a turn replayed) is answered by that read, as a SELECT of the keys
// would be; with WriteOptions.OutcomeOnly that read returns only what a
// replay needs (claimReplayManySQL), and the keys whose records it cannot
// decide (in flight, another call's) are read again whole. Either way the
// entries the first statement did not decide (a record dead, lapsed or
// released, a key inserted meanwhile by another turn) are then claimed
// by idem_claim_many, a second round trip. Each statement draws one nonce,
// and is sent again with it after a connection lost mid-statement, as
// Claim is. When the second statement fails after
// the first granted claims, the granted entries are returned as granted
// and the others carry the failure in their ClaimResult.Err: a claim the
// database holds is never dropped.
func (s *Store) ClaimMany(ctx context.Context, scope string, es []store.Entry, lease time.Duration, opts store.WriteOptions) ([]store.ClaimResult, error) {
	if err := s.checkWrite(ctx, scope, opts, es...); err != nil {
		return nil, err
	}
	if len(es) > s.maxClaimBatch {
		return nil, &store.LimitError{Limit: "MaxClaimBatch", Value: len(es), Max: s.maxClaimBatch}
	}
	if err := store.CheckDistinct(es); err != nil {
		return nil, err
	}
	if err := store.CheckDuration("lease", lease); err != nil {
		return nil, err
	}
	if len(es) == 0 {
		return []store.ClaimResult{}, nil
	}
	return s.claimMany(ctx, scope, es, lease, opts)
}

// claimMany is ClaimMany of checked input, at least one entry. Unless the
// calls are hinted as likely new (or reads are confirmed), the keys are
// read first (claimReadManySQL): a turn whose records all decide by
// themselves (stored, claimed elsewhere, another call's) is answered by
// that one read, and only the others are claimed, in a second round trip.
// Hinted, on plain PostgreSQL, the first statement also inserts the keys
// that have no record (claimNewManySQL); on Citus, and with ConfirmReads,
// the batch goes to idem_claim_many at once.
func (s *Store) claimMany(ctx context.Context, scope string, es []store.Entry, lease time.Duration, opts store.WriteOptions) ([]store.ClaimResult, error) {
	var (
		out  []store.ClaimResult
		rest []int
		err  error
	)
	switch {
	case s.confirmReads, opts.LikelyNew && s.citus.distributed:
		return s.claimManyNow(ctx, scope, es, lease, opts)
	case opts.LikelyNew:
		out, rest, err = s.claimNewMany(ctx, scope, es, lease, opts)
	case opts.OutcomeOnly:
		out, rest, err = s.claimReplayMany(ctx, scope, es)
	default:
		out, rest, err = s.claimReadMany(ctx, scope, es)
	}
	if err != nil || len(rest) == 0 {
		return out, err
	}
	undecided := make([]store.Entry, len(rest))
	for j, i := range rest {
		undecided[j] = es[i]
	}
	claimed, err := s.claimManyNow(ctx, scope, undecided, lease, opts)
	if err != nil {
		return failRest(out, rest, err)
	}
	for j, i := range rest {
		out[i] = claimed[j]
	}
	return out, nil
}

// failRest ends a batch whose second statement failed with err: the
// entries that statement was to claim (rest) carry err, and the batch is
// returned, unless the first statement granted no claim, when err is the
// batch's, as a first statement's failure is. A granted claim is so never
// dropped by the failure of another entry's statement: dropped, it would
// be held until its lease ended, and the call's next claim would wait for
// it.
func failRest(out []store.ClaimResult, rest []int, err error) ([]store.ClaimResult, error) {
	granted := false
	for i := range out {
		granted = granted || (out[i].Err == nil && out[i].State == store.ClaimGranted)
	}
	if !granted {
		return nil, err
	}
	for _, i := range rest {
		out[i] = store.ClaimResult{Err: err}
	}
	return out, nil
}

// claimReadMany is claimMany's first look for calls likely stored
// (claimReadManySQL): the results of the entries whose records decide by
// themselves, and the indexes (in es) of the others, which must be
// claimed.
func (s *Store) claimReadMany(ctx context.Context, scope string, es []store.Entry) (out []store.ClaimResult, rest []int, err error) {
	keys := make([][]byte, len(es))
	for i := range es {
		keys[i] = es[i].Key[:]
	}
	return s.firstLook(ctx, scope, es, nil, s.sql.ClaimReadMany, scope, keys)
}

// claimNewMany is claimMany's one step for a turn likely new, on plain
// PostgreSQL (claimNewManySQL): the results of the entries it inserted or
// whose records decide by themselves, and the indexes (in es) of the
// others, which idem_claim_many must claim. Sent again whatever happened
// to the connection: its nonce makes a second run hand back what the
// first one granted.
func (s *Store) claimNewMany(ctx context.Context, scope string, es []store.Entry, lease time.Duration, opts store.WriteOptions) (out []store.ClaimResult, rest []int, err error) {
	keys, tools, fps := entryArrays(es)
	nonce := newNonce()
	return s.firstLook(ctx, scope, es, nonce, s.sql.ClaimNewMany, scope, keys, tools, fps,
		micros(lease), micros(opts.TTL(s.defaultTTL)), nonce)
}

// firstLook runs a batch's first statement, sql with args, whose rows are
// (key, prior, RecordColumns, claim nonce, clock, inserted), at most one
// a key of es: the results of the entries whose rows decide (inserted, or
// decided as after Claim's read, nonce being the statement's, nil for a
// read), and the indexes (in es) of the others (no row, or one that does
// not decide), which idem_claim_many must claim.
func (s *Store) firstLook(ctx context.Context, scope string, es []store.Entry, nonce []byte, sql string, args ...any) (out []store.ClaimResult, rest []int, err error) {
	type lookRow struct {
		key   []byte
		prior pgtype.Int2
		rec   recordScan
		look  lookColumns
	}
	rows := make([]lookRow, 0, len(es))
	err = s.do(ctx, "claim", rerunAlways, func(conn *pgxpool.Conn) error {
		rows = rows[:0]
		res, err := conn.Query(ctx, sql, args...)
		if err != nil {
			return err
		}
		defer res.Close()
		for res.Next() {
			rows = append(rows, lookRow{})
			r := &rows[len(rows)-1]
			if err := res.Scan(append([]any{&r.key, &r.prior}, r.rec.targets(&r.look.nonce, &r.look.now, &r.look.inserted)...)...); err != nil {
				return err
			}
		}
		return res.Err()
	})
	if err != nil {
		return nil, nil, s.translate("claim", err)
	}
	index := newBatchIndex(es)
	out = make([]store.ClaimResult, len(es))
	decided := make([]bool, len(es))
	for n := range rows {
		r := &rows[n]
		i, err := index.take(r.key)
		if err != nil {
			return nil, nil, err
		}
		if decides, won := r.rec.decideFirstLook(r.look, es[i].Fingerprint, nonce); decides {
			decided[i] = true
			out[i] = s.decideClaim(scope, es[i], won, r.prior, &r.rec)
		}
	}
	for i := range es {
		if !decided[i] {
			rest = append(rest, i)
		}
	}
	return out, rest, nil
}

// batchIndex finds the entry of a batch a row of the database's answer is
// about, by its key column.
type batchIndex struct {
	at   map[keyhash.Sum]int
	seen []bool
}

func newBatchIndex(es []store.Entry) batchIndex {
	at := make(map[keyhash.Sum]int, len(es))
	for i := range es {
		at[es[i].Key] = i
	}
	return batchIndex{at: at, seen: make([]bool, len(es))}
}

// take returns the index of the entry of key; a key not asked for, or
// answered twice, is the database breaking the statement's contract.
func (b batchIndex) take(key []byte) (int, error) {
	var k keyhash.Sum
	i, ok := 0, len(key) == len(k)
	if ok {
		copy(k[:], key)
		i, ok = b.at[k]
	}
	if !ok || b.seen[i] {
		return 0, &store.UnavailableError{Op: "claim", Err: fmt.Errorf("the database answered key %x, not asked for or twice", key)}
	}
	b.seen[i] = true
	return i, nil
}

// entryArrays returns the keys, tools and fingerprints of es, in order:
// the array parameters of a batch's claim statements.
func entryArrays(es []store.Entry) (keys [][]byte, tools []string, fps [][]byte) {
	keys = make([][]byte, len(es))
	tools = make([]string, len(es))
	fps = make([][]byte, len(es))
	for i := range es {
		keys[i], tools[i], fps[i] = es[i].Key[:], es[i].Tool, es[i].Fingerprint[:]
	}
	return keys, tools, fps
}

// claimManyNow claims entries with idem_claim_many, in one statement.
func (s *Store) claimManyNow(ctx context.Context, scope string, es []store.Entry, lease time.Duration, opts store.WriteOptions) ([]store.ClaimResult, error) {
	keys, tools, fps := entryArrays(es)
	nonce := newNonce()
	type claimRow struct {
		key   []byte
		won   bool
		prior pgtype.Int2
		rec   recordScan
	}
	rows := make([]claimRow, 0, len(es))
	err := s.do(ctx, "claim", rerunAlways, func(conn *pgxpool.Conn) error {
		rows = rows[:0]
		res, err := conn.Query(ctx, s.sql.ClaimMany, scope, keys, tools, fps, micros(lease), micros(opts.TTL(s.defaultTTL)), nonce)
		if err != nil {
			return err
		}
		defer res.Close()
		for res.Next() {
			rows = append(rows, claimRow{})
			r := &rows[len(rows)-1]
			if err := res.Scan(append([]any{&r.key, &r.won, &r.prior}, r.rec.targets()...)...); err != nil {
				return err
			}
		}
		return res.Err()
	})
	if err != nil {
		return nil, s.translate("claim", err)
	}
	if len(rows) != len(es) {
		return nil, &store.UnavailableError{Op: "claim", Err: fmt.Errorf("the database answered %d rows for %d calls", len(rows), len(es))}
	}
	out := make([]store.ClaimResult, len(es))
	for i := range rows {
		e := es[i]
		if string(rows[i].key) != string(e.Key[:]) {
			return nil, &store.UnavailableError{Op: "claim", Err: fmt.Errorf("the database answered key %x for call %d, key %s", rows[i].key, i, e.Key)}
		}
		out[i] = s.decideClaim(scope, e, rows[i].won, rows[i].prior, &rows[i].rec)
	}
	if s.confirmReads {
		if err := s.confirmMany(ctx, scope, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// confirmMany confirms the outcomes a ClaimMany found (Config.ConfirmReads):
// idem_claim_many's first look does not wait for the synchronous standby,
// so the replayed entries are read again, all at once, by the confirmed
// GetMany. An entry whose outcome that read does not find as it was found
// gets a *store.UnavailableError of its own (a failover under way); the
// claims granted in the batch stand.
func (s *Store) confirmMany(ctx context.Context, scope string, out []store.ClaimResult) error {
	var keys [][]byte
	for i := range out {
		if out[i].Err == nil && out[i].State == store.ClaimCompleted {
			keys = append(keys, out[i].Record.Key[:])
		}
	}
	if len(keys) == 0 {
		return nil
	}
	found := make(map[keyhash.Sum]store.Record, len(keys))
	err := s.do(ctx, "confirm", rerunAlways, func(conn *pgxpool.Conn) error {
		clear(found)
		rows, err := conn.Query(ctx, s.sql.GetMany, scope, keys) // ConfirmedGetMany (New)
		if err != nil {
			return err
		}
		return forEachRecord(rows, s.codec, nil, func() string { return scope },
			func(rec store.Record) { found[rec.Key] = rec })
	})
	if err != nil {
		return s.translate("confirm", err)
	}
	for i := range out {
		r := &out[i]
		if r.Err != nil || r.State != store.ClaimCompleted {
			continue
		}
		if got, ok := found[r.Record.Key]; !ok || got.Token != r.Record.Token || !got.UpdatedAt.Equal(r.Record.UpdatedAt) {
			*r = store.ClaimResult{Err: errNotConfirmed()}
		}
	}
	return nil
}

// decideClaim turns one row of claimSQL into the entry's result. A record
// that cannot be decoded (a stored result that does not open: a
// *seal.OpenError) is the entry's error: it is neither replayed nor
// claimed over.
func (s *Store) decideClaim(scope string, e store.Entry, won bool, prior pgtype.Int2, row *recordScan) store.ClaimResult {
	rec, err := row.meta(scope, e.Key)
	if err != nil {
		return store.ClaimResult{Err: err}
	}
	if won {
		s.stats.claims.Add(1)
		// A later attempt is a takeover (the earlier outcome is unknown)
		// unless the record was released by this call: then the earlier
		// attempt is known to have failed. A record that changed after the
		// function's first read counts as a takeover, the cautious reading
		// (it only makes the executor ask the tool's Reconciler).
		takenOver := rec.Attempts > 1 && !(prior.Valid && store.Status(prior.Int16) == store.StatusReleased)
		if takenOver {
			s.stats.takeovers.Add(1)
		}
		return store.ClaimResult{
			State:  store.ClaimGranted,
			Record: rec,
			Claim: store.Claim{
				Scope:      scope,
				Key:        e.Key,
				Token:      rec.Token,
				LeaseUntil: rec.LeaseUntil,
				Attempt:    rec.Attempts,
				// The caller's fingerprint is the record's: a claim is
				// granted only over no record, this call's own, or a
				// released one, whose fingerprint it then takes.
				Fingerprint: e.Fingerprint,
			},
			TakenOver: takenOver,
		}
	}
	if err := store.CheckFingerprint(scope, e, rec); err != nil {
		s.stats.mismatches.Add(1)
		return store.ClaimResult{Err: err}
	}
	if rec.Status == store.StatusCompleted {
		if err := row.open(s.codec, &rec); err != nil {
			return store.ClaimResult{Err: err}
		}
		s.stats.replays.Add(1)
		return store.ClaimResult{State: store.ClaimCompleted, Record: rec}
	}
	// Not won, same call: a live claim of another caller (or, after a race
	// the function lost, a record that changed since: the caller waits
	// for it and claims again).
	return store.ClaimResult{State: store.ClaimInFlight, Record: rec}
}

// lookColumns are the columns a claim's first look returns after the
// record's (pgsql's claimReadSQL, claimReadManySQL, claimNewManySQL): the
// record's claim nonce (NULL when none), the database's clock, and whether
// the statement inserted the record (the reads never do; claimNewSQL
// returns only what its insert decided, see recordScan.setInserted).
type lookColumns struct {
	nonce    []byte
	now      time.Time
	inserted bool
}

// decideFirstLook decides a claim from its first look at a record, by
// idem_claim's rule and the database's clock. decides: the record answers
// the claim by itself (one the statement inserted, or one not dead, lapsed
// or released); won: the claim holds it (inserted, or a pending record
// carrying the Claim's nonce; a read passes no nonce and wins nothing). A
// record is dead when its scope expired, unless it is a claim whose lease
// still runs; lapsed when it is this call's claim (same fingerprint) whose
// lease ended. A record that does not decide is claimed by idem_claim,
// which decides again under the row's lock.
// TestFirstLookDecidesByIdemClaimsRule holds this rule to idem_claim's SQL.
func (r *recordScan) decideFirstLook(look lookColumns, fp keyhash.Sum, nonce []byte) (decides, won bool) {
	if look.inserted {
		return true, true
	}
	pending := store.Status(r.status) == store.StatusPending
	leaseLive := pending && r.leaseUntil.Valid && r.leaseUntil.Time.After(look.now)
	dead := !r.expiresAt.After(look.now) && !leaseLive
	lapsed := pending && r.leaseUntil.Valid && !leaseLive && bytes.Equal(r.fingerprint, fp[:])
	released := store.Status(r.status) == store.StatusReleased
	return !(dead || lapsed || released), pending && len(nonce) > 0 && bytes.Equal(look.nonce, nonce)
}

// checkWrite checks what every record-creating write gets, before anything
// is written.
func (s *Store) checkWrite(ctx context.Context, scope string, opts store.WriteOptions, es ...store.Entry) error {
	if err := s.checkOpen(ctx); err != nil {
		return err
	}
	return store.CheckWrite(ctx, s.limits, scope, opts, es...)
}
