package pgstore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/executor"
	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/pgstore"
	"github.com/idemstore/idemstore/store/seal"
	"github.com/idemstore/idemstore/store/storetest"
)

// randomKeys returns a fresh random key for each id.
func randomKeys(t *testing.T, ids ...seal.KeyID) map[seal.KeyID][]byte {
	t.Helper()
	keys := map[seal.KeyID][]byte{}
	for _, id := range ids {
		k := make([]byte, seal.KeySize)
		_, err := rand.Read(k)
		require.NoError(t, err)
		keys[id] = k
	}
	return keys
}

func newSealer(t *testing.T, current seal.KeyID, keys map[seal.KeyID][]byte) *seal.Sealer {
	t.Helper()
	s, err := seal.New(seal.Config{Current: current, Keys: keys})
	require.NoError(t, err)
	return s
}

// TestConformanceWithSealer runs the whole suite with every result sealed.
func TestConformanceWithSealer(t *testing.T) {
	t.Parallel()
	sealer := newSealer(t, 1, randomKeys(t, 1))
	storetest.Run(t, func(t *testing.T) storetest.Bundle {
		return storetest.Bundle{Store: newStore(t, &pgstore.Config{Sealer: sealer}), Advance: time.Sleep}
	})
}

// storedRow is a record's result as the table holds it.
type storedRow struct {
	scope    string
	key      []byte
	status   int16
	encoding *int16
	result   []byte
}

func storedRows(ctx context.Context, t *testing.T, pool *pgxpool.Pool, schema string) []storedRow {
	t.Helper()
	rows, err := pool.Query(ctx, "SELECT scope, key, status, encoding, result FROM "+pgx.Identifier{schema, "idem_records"}.Sanitize()+" ORDER BY scope, key")
	require.NoError(t, err)
	var out []storedRow
	var r storedRow
	_, err = pgx.ForEachRow(rows, []any{&r.scope, &r.key, &r.status, &r.encoding, &r.result}, func() error {
		out = append(out, r)
		return nil
	})
	require.NoError(t, err)
	return out
}

// sealedSecret is a result an operator must never find in the table.
func sealedSecret(n string) store.Outcome {
	return store.Outcome{Kind: store.KindSuccess, Result: []byte(`{"card":"4111-1111-1111-` + n + `","holder":"Ada Lovelace"}`)}
}

// With a key configured, every way a result is written (Put, PutTx,
// Complete, CompleteTx, an operator's resolution, TxTool in both modes)
// leaves no plaintext in idem_records, and every way of reading it gives
// the plaintext back.
func TestNoPlaintextResultInTheTable(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, schema := newSchema(t)
	st := openStore(t, pool, schema, &pgstore.Config{Sealer: newSealer(t, 7, randomKeys(t, 7))})
	want := map[string][]byte{} // invocation id → result

	_, stored, err := st.Put(ctx, "run", entry("put", `{}`), sealedSecret("0001"), store.WriteOptions{})
	require.NoError(t, err)
	require.True(t, stored)
	want["put"] = sealedSecret("0001").Result

	c := mustClaim(ctx, t, st, "run", entry("complete", `{}`), time.Minute)
	rec, err := st.Complete(ctx, c, sealedSecret("0002"))
	require.NoError(t, err)
	require.Equal(t, sealedSecret("0002").Result, rec.Outcome.Result)
	want["complete"] = sealedSecret("0002").Result

	c = mustClaim(ctx, t, st, "run", entry("completetx", `{}`), time.Minute)
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		rec, err := st.CompleteTx(ctx, tx, c, sealedSecret("0003"))
		require.Equal(t, sealedSecret("0003").Result, rec.Outcome.Result)
		return err
	}))
	want["completetx"] = sealedSecret("0003").Result

	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, stored, err := st.PutTx(ctx, tx, "run", entry("puttx", `{}`), sealedSecret("0004"), store.WriteOptions{})
		require.True(t, stored)
		return err
	}))
	want["puttx"] = sealedSecret("0004").Result

	c = mustClaim(ctx, t, st, "run", entry("resolve", `{}`), time.Minute)
	rec, err = st.ResolveStore(ctx, "run", c.Key, c.Token, sealedSecret("0005"))
	require.NoError(t, err)
	require.Equal(t, sealedSecret("0005").Result, rec.Outcome.Result)
	want["resolve"] = sealedSecret("0005").Result

	// A claim made by hand names no fingerprint: its record's is read.
	c = mustClaim(ctx, t, st, "run", entry("byhand", `{}`), time.Minute)
	_, err = st.Complete(ctx, store.Claim{Scope: c.Scope, Key: c.Key, Token: c.Token}, sealedSecret("0006"))
	require.NoError(t, err)
	want["byhand"] = sealedSecret("0006").Result

	tool := st.TxTool(func(_ context.Context, _ pgx.Tx, call executor.Call) (executor.Result, error) {
		return executor.Result{Output: append([]byte(`{"card":"4111-1111-1111-0007","for":`), append(call.Args, '}')...)}, nil
	})
	for _, mode := range []executor.Mode{executor.ModeExclusive, executor.ModeProbeThenStore} {
		ex, err := executor.New(tool, st, &executor.Config{Mode: mode})
		require.NoError(t, err)
		call := executor.Call{Tool: "send_mail", InvocationID: "txtool-" + mode.String(), Args: json.RawMessage(`{"mode":"` + mode.String() + `"}`)}
		res, err := ex.ForScope("run").Execute(ctx, call)
		require.NoError(t, err)
		require.True(t, res.Stored)
		again, err := ex.ForScope("run").Execute(ctx, call)
		require.NoError(t, err)
		require.True(t, again.Replayed)
		require.Equal(t, res.Output, again.Output)
		want[call.InvocationID] = res.Output
	}

	rows := storedRows(ctx, t, pool, schema)
	require.Len(t, rows, len(want))
	for _, r := range rows {
		require.Equal(t, int16(store.StatusCompleted), r.status)
		require.Equal(t, int16(2), *r.encoding, "sealed v1")
		require.False(t, bytes.Contains(r.result, []byte("4111")), "no plaintext result in the table: %q", r.result)
		require.False(t, bytes.Contains(r.result, []byte("Lovelace")))
		id, ok := seal.KeyIDOf(r.result)
		require.True(t, ok)
		require.Equal(t, seal.KeyID(7), id)
	}
	keys := make([]keyhash.Sum, 0, len(want))
	for id, result := range want {
		k := keyhash.IDKey(id)
		keys = append(keys, k)
		got, err := st.Get(ctx, "run", k)
		require.NoError(t, err, id)
		require.Equal(t, result, got.Outcome.Result, id)
	}
	many, err := st.GetMany(ctx, "run", keys)
	require.NoError(t, err)
	require.Len(t, many, len(want))
	for id, result := range want {
		require.Equal(t, result, many[keyhash.IDKey(id)].Outcome.Result, id)
	}
}

// call is a call as the executor sees it, and as the store does.
type call struct{ scope, id, args string }

func (c call) entry(t *testing.T) store.Entry { return mustEntry(t, c.executorCall()) }

func (c call) executorCall() executor.Call {
	return executor.Call{Tool: "send_mail", InvocationID: c.id, Args: json.RawMessage(c.args)}
}

var (
	victim = call{"run", "victim", `{"to":"ada@example.com"}`}
	other  = call{"run", "other", `{"to":"bob@example.com"}`}
)

// tamperings change the victim's completed record by SQL, as anyone with
// write access to the table could ($1 scope, $2 the victim's key, $3 the
// other record's key), and name the call that would now find it.
var tamperings = map[string]struct {
	sql  []string
	call call
}{
	"one flipped byte": {
		[]string{`UPDATE {records} SET result = set_byte(result, 20, get_byte(result, 20) # 1) WHERE scope = $1 AND key = $2 AND $3::bytea IS NOT NULL`},
		victim},
	"another record's result copied onto it": {
		[]string{`UPDATE {records} AS r SET result = o.result FROM {records} AS o
			WHERE r.scope = $1 AND r.key = $2 AND o.scope = $1 AND o.key = $3`},
		victim},
	"moved onto another call (its key and fingerprint)": {
		[]string{
			`CREATE TEMP TABLE moved ON COMMIT DROP AS SELECT fingerprint FROM {records} WHERE scope = $1 AND key = $3 AND $2::bytea IS NOT NULL`,
			`DELETE FROM {records} WHERE scope = $1 AND key = $3 AND $2::bytea IS NOT NULL`,
			`UPDATE {records} SET key = $3, fingerprint = (SELECT fingerprint FROM moved) WHERE scope = $1 AND key = $2`,
		},
		other},
	"moved to another scope": {
		[]string{`UPDATE {records} SET scope = 'run-other' WHERE scope = $1 AND key = $2 AND $3::bytea IS NOT NULL`},
		call{"run-other", victim.id, victim.args}},
	"another call's fingerprint": {
		[]string{`UPDATE {records} AS r SET fingerprint = o.fingerprint FROM {records} AS o
			WHERE r.scope = $1 AND r.key = $2 AND o.scope = $1 AND o.key = $3`},
		call{"run", victim.id, other.args}},
	"outcome kind changed": {
		[]string{`UPDATE {records} SET outcome_kind = 2 WHERE scope = $1 AND key = $2 AND $3::bytea IS NOT NULL`},
		victim},
}

// A record changed by SQL (one flipped byte, another record's result, a
// row moved onto another call or scope, another fingerprint or kind) gives
// the typed error on every read and is never replayed: Get, GetMany, Put,
// Claim and ClaimMany refuse it with *seal.OpenError, a Claim does not
// claim over it (the row stays as it is, for an operator), and the
// executor fails the call with it, in both modes, without running the
// tool.
func TestTamperedRecordIsRefusedAndNeverReplayed(t *testing.T) {
	t.Parallel()
	sealer := newSealer(t, 1, randomKeys(t, 1))
	for name, tc := range tamperings {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t)
			pool, schema := newSchema(t)
			st := openStore(t, pool, schema, &pgstore.Config{Sealer: sealer})
			for _, c := range []call{victim, other} {
				_, stored, err := st.Put(ctx, c.scope, c.entry(t), success(`{"sent":"`+c.id+`"}`), store.WriteOptions{})
				require.NoError(t, err)
				require.True(t, stored)
			}
			records := pgx.Identifier{schema, "idem_records"}.Sanitize()
			vk, otherKey := victim.entry(t).Key, other.entry(t).Key
			require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				for _, sql := range tc.sql {
					if _, err := tx.Exec(ctx, strings.ReplaceAll(sql, "{records}", records), "run", vk[:], otherKey[:]); err != nil {
						return err
					}
				}
				return nil
			}))
			before := storedRows(ctx, t, pool, schema)

			e := tc.call.entry(t)
			requireSealed := func(err error) {
				t.Helper()
				var oe *seal.OpenError
				require.ErrorAs(t, err, &oe)
				require.Equal(t, tc.call.scope, oe.Scope)
				require.Equal(t, e.Key, oe.Key)
				require.ErrorIs(t, err, seal.ErrSealed)
				require.Equal(t, contract.ClassPermanent, contract.ClassOf(err), "an operator must act")
			}
			_, err := st.Get(ctx, tc.call.scope, e.Key)
			requireSealed(err)
			_, err = st.GetMany(ctx, tc.call.scope, []keyhash.Sum{e.Key})
			requireSealed(err)
			_, stored, err := st.Put(ctx, tc.call.scope, e, success("x"), store.WriteOptions{})
			requireSealed(err)
			require.False(t, stored)
			res, err := st.Claim(ctx, tc.call.scope, e, time.Minute, store.WriteOptions{})
			requireSealed(err)
			require.Zero(t, res.State, "neither replayed nor claimed")
			many, err := st.ClaimMany(ctx, tc.call.scope, []store.Entry{e}, time.Minute, store.WriteOptions{})
			require.NoError(t, err)
			requireSealed(many[0].Err)
			require.Zero(t, many[0].State)

			var ran atomic.Int32
			tool := executor.ExecutorFunc(func(context.Context, executor.Call) (executor.Result, error) {
				ran.Add(1)
				return executor.Result{Output: []byte("ran again")}, nil
			})
			for _, mode := range []executor.Mode{executor.ModeExclusive, executor.ModeProbeThenStore} {
				ex, err := executor.New(tool, st, &executor.Config{Mode: mode})
				require.NoError(t, err)
				_, err = ex.ForScope(tc.call.scope).Execute(ctx, tc.call.executorCall())
				requireSealed(err)
			}
			require.Zero(t, ran.Load(), "the tool never runs over a record that does not open")
			require.Zero(t, st.Stats().Claims)
			require.Equal(t, before, storedRows(ctx, t, pool, schema), "the record is left as it is, for an operator")
		})
	}
}

// A store without keys refuses a sealed record with the typed error, and
// says which key it lacks; a store whose Sealer refuses plaintext refuses
// a record stored in clear.
func TestStoreWithoutTheKeyRefusesSealedRecords(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, schema := newSchema(t)
	keys := randomKeys(t, 1, 2)
	sealed := openStore(t, pool, schema, &pgstore.Config{Sealer: newSealer(t, 2, keys)})
	plain := openStore(t, pool, schema, nil)
	_, _, err := sealed.Put(ctx, "run", entry("sealed", `{}`), success("secret"), store.WriteOptions{})
	require.NoError(t, err)
	_, _, err = plain.Put(ctx, "run", entry("clear", `{}`), success("in clear"), store.WriteOptions{})
	require.NoError(t, err)

	_, err = plain.Get(ctx, "run", keyhash.IDKey("sealed"))
	var oe *seal.OpenError
	require.ErrorAs(t, err, &oe)
	require.Equal(t, seal.KeyID(2), oe.KeyID)
	require.Contains(t, err.Error(), "sealed with key id 2, which this process does not hold (it holds none)")
	old := openStore(t, pool, schema, &pgstore.Config{Sealer: newSealer(t, 1, map[seal.KeyID][]byte{1: keys[1]})})
	_, err = old.Get(ctx, "run", keyhash.IDKey("sealed"))
	require.ErrorAs(t, err, &oe)
	require.Contains(t, err.Error(), "which this process does not hold (it holds 1)")

	rec, err := sealed.Get(ctx, "run", keyhash.IDKey("clear"))
	require.NoError(t, err, "a record stored in clear stays readable")
	require.Equal(t, "in clear", string(rec.Outcome.Result))
	strict, err := seal.New(seal.Config{Current: 2, Keys: keys, RefusePlaintext: true})
	require.NoError(t, err)
	refusing := openStore(t, pool, schema, &pgstore.Config{Sealer: strict})
	_, err = refusing.Get(ctx, "run", keyhash.IDKey("clear"))
	require.ErrorAs(t, err, &oe)
	require.Contains(t, oe.Problem, "plaintext is refused")
	rec, err = refusing.Get(ctx, "run", keyhash.IDKey("sealed"))
	require.NoError(t, err)
	require.Equal(t, "secret", string(rec.Outcome.Result))
}

// A claim names its call's fingerprint, which a sealed outcome is bound
// to: one that names another call's is not current, with or without a
// Sealer; one made by hand names none and is completed (in the caller's
// transaction too) after its record's fingerprint is read.
func TestCompleteBindsTheClaimsFingerprint(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, schema := newSchema(t)
	for _, cfg := range []*pgstore.Config{nil, {Sealer: newSealer(t, 1, randomKeys(t, 1))}} {
		st := openStore(t, pool, schema, cfg)
		scope := fmt.Sprintf("run-%t", cfg != nil)
		c := mustClaim(ctx, t, st, scope, entry("a", `{}`), time.Minute)
		require.Equal(t, entry("a", `{}`).Fingerprint, c.Fingerprint)
		forged := c
		forged.Fingerprint = entry("a", `{"other":"args"}`).Fingerprint
		_, err := st.Complete(ctx, forged, success("x"))
		require.ErrorIs(t, err, store.ErrLeaseLost)
		require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			_, err := st.CompleteTx(ctx, tx, forged, success("x"))
			require.ErrorIs(t, err, store.ErrLeaseLost)
			return nil
		}))

		byHand := store.Claim{Scope: c.Scope, Key: c.Key, Token: c.Token}
		require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			_, err := st.CompleteTx(ctx, tx, byHand, success("by hand"))
			return err
		}))
		rec, err := st.Get(ctx, scope, c.Key)
		require.NoError(t, err)
		require.Equal(t, "by hand", string(rec.Outcome.Result))
		_, err = st.CompleteTx(ctx, nil, byHand, success("again"))
		require.ErrorIs(t, err, store.ErrInvalidInput)
		_, err = st.Complete(ctx, byHand, success("again"))
		require.ErrorIs(t, err, store.ErrLeaseLost, "completed already")
	}
}
