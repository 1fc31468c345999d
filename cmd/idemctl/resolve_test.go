package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/store"
)

// An operator who found that a stuck call's side effect happened stores its
// outcome with the token list printed: the holder, still running, is fenced
// off (its Complete and Renew get ErrLeaseLost), a caller waiting for the
// call wakes and replays the operator's bytes, and so does every later call.
func TestStoreFencesOffTheLiveHolderAndWakesItsWaiters(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	holder := f.stuck("run-1", "mail")
	waiter := make(chan error, 1)
	go func() { waiter <- f.st.Wait(f.ctx, "run-1", holder.Key, holder.Token) }()

	listed := f.listed()
	require.Len(t, listed.Records, 1)
	rec := listed.Records[0]
	require.Equal(t, "stuck", rec.Problem)

	result := filepath.Join(t.TempDir(), "result.json")
	require.NoError(t, os.WriteFile(result, []byte(`{"sent":true,"id":"msg-42"}`), 0o600))
	r := f.ctl("store", "-scope", rec.Scope, "-key", rec.Key, "-token", strconv.FormatInt(rec.Token, 10), "-result", result)
	requireOK(t, r)
	require.Regexp(t, fmt.Sprintf(`^stored: scope run-1 key %s, token %d -> \d+ \(a holder still running is fenced off; every later call replays it\)\n$`, rec.Key, rec.Token), r.stdout)

	select {
	case err := <-waiter:
		require.NoError(t, err, "the waiter wakes")
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter was not woken")
	}
	_, err := f.st.Complete(f.ctx, holder, success(`{"sent":true,"id":"msg-43"}`))
	require.ErrorIs(t, err, store.ErrLeaseLost, "the holder is fenced off")
	_, err = f.st.Renew(f.ctx, holder, time.Hour)
	require.ErrorIs(t, err, store.ErrLeaseLost)
	got, err := f.st.Get(f.ctx, "run-1", holder.Key)
	require.NoError(t, err)
	require.Equal(t, `{"sent":true,"id":"msg-42"}`, string(got.Outcome.Result))
	require.Empty(t, f.listed().Records, "resolved: nothing needs attention")

	// The same resolution again: the record is completed now.
	r = f.ctl("store", "-scope", rec.Scope, "-key", rec.Key, "-token", strconv.FormatInt(got.Token, 10), "-result", result)
	requireOneLineFailure(t, r, exitFail, "the record is completed")
}

// An operator who decided that a call must run again releases it with a
// note: the holder is fenced off, the next caller runs the call (not a
// takeover) and sees the note as the record's last error.
func TestReleaseLetsTheNextCallerRunAndKeepsTheNote(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	holder := f.abandoned("run-1", "mail")
	r := f.ctl("release", "-scope", "run-1", "-key", holder.Key.String(), "-token", strconv.FormatInt(holder.Token, 10),
		"-note", "ops: the mail server lost it, send again", "-json")
	requireOK(t, r)
	require.Contains(t, r.stdout, `"resolved": "released"`)
	require.Contains(t, r.stdout, `"last_error": "ops: the mail server lost it, send again"`)

	_, err := f.st.Complete(f.ctx, holder, success("late"))
	require.ErrorIs(t, err, store.ErrLeaseLost)
	res, err := f.st.Claim(f.ctx, "run-1", entry("mail"), time.Hour, store.WriteOptions{})
	require.NoError(t, err)
	require.Equal(t, store.ClaimGranted, res.State)
	require.False(t, res.TakenOver)
	require.Equal(t, "ops: the mail server lost it, send again", res.Record.LastError)
}

// A resolution names the token it was listed with: a stale token, a key
// that is not there, or bad input is refused with one line and the right
// exit status, and changes nothing.
func TestResolutionsAreRefusedWithOneLine(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.abandoned("run-1", "mail")
	key, tok := c.Key.String(), strconv.FormatInt(c.Token, 10)

	const parse = -1 // refused while parsing: exit status 2 and a hint
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"release", "-scope", "run-1", "-key", key, "-token", strconv.FormatInt(c.Token+100, 10), "-note", "x"},
			exitFail, "is not the record's current token: it changed since it was listed"},
		{[]string{"release", "-scope", "run-2", "-key", key, "-token", tok, "-note", "x"}, exitFail, "no such live record"},
		{[]string{"release", "-scope", "run-1", "-key", "abc", "-token", tok, "-note", "x"}, exitUsage, `invalid -key "abc"`},
		{[]string{"release", "-scope", "run-1", "-key", key, "-token", "0", "-note", "x"}, parse, `invalid -token "0"`},
		{[]string{"release", "-scope", "run-1", "-key", key, "-token", tok}, parse, "release needs -note"},
		{[]string{"release", "-scope", "run-1", "-key", key, "-token", tok, "-note", "  "}, parse, "release needs -note"},
		{[]string{"store", "-scope", "run-1", "-key", key, "-token", tok}, parse, "store needs -result"},
		{[]string{"store", "-scope", "run-1", "-key", key, "-token", tok, "-result", "/nonexistent/x"}, exitUsage, `-result "/nonexistent/x"`},
		{[]string{"store", "-scope", "run-1", "-key", key, "-token", tok, "-result", "-", "-kind", "maybe"}, exitUsage, `invalid -kind "maybe"`},
		{[]string{"store", "-scope", "run-1", "-key", key, "-token", tok, "-result", "/"}, exitUsage, `-result "/": is a directory`},
	} {
		r := f.ctl(tc.args...)
		if tc.code == parse {
			requireUsage(t, r, tc.want)
		} else {
			requireOneLineFailure(t, r, tc.code, tc.want)
		}
	}
	r := runCtlIn(context.Background(), strings.NewReader(strings.Repeat("x", 2<<20)),
		"-database-url", f.url, "-schema", f.schema, "store", "-scope", "run-1", "-key", key, "-token", tok, "-result", "-")
	requireOneLineFailure(t, r, exitUsage, "limit MaxResultBytes")

	out := f.listed()
	require.Len(t, out.Records, 1)
	require.Equal(t, c.Token, out.Records[0].Token, "nothing changed")

	// Standard input as the result, as a permanent failure.
	r = runCtlIn(context.Background(), strings.NewReader(`{"error":"card declined"}`),
		"-database-url", f.url, "-schema", f.schema, "store", "-scope", "run-1", "-key", key, "-token", tok, "-result", "-", "-kind", "permanent_failure")
	requireOK(t, r)
	rec, err := f.st.Get(f.ctx, "run-1", c.Key)
	require.NoError(t, err)
	require.Equal(t, store.KindPermanentFailure, rec.Outcome.Kind)
	require.Equal(t, `{"error":"card declined"}`, string(rec.Outcome.Result))
}

// The holder completes while the operator stores an outcome, both waiting
// on the record's row lock: exactly one wins, and the record holds the
// winner's bytes. When the operator wins, the holder's Complete gets
// ErrLeaseLost; when the holder wins, the operator is told that the record
// is completed. The row lock (held by a transaction of the test) lines them
// up in a chosen order, so both endings are checked every run.
func TestStoreRacingALiveHolderHasOneWinner(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	resultFile := filepath.Join(t.TempDir(), "result")
	require.NoError(t, os.WriteFile(resultFile, []byte("operator"), 0o600))
	for i, operatorFirst := range []bool{true, false, true, false} {
		c := f.claim("run-1", fmt.Sprintf("call-%d", i))
		tx, err := f.admin.Begin(f.ctx)
		require.NoError(t, err)
		_, err = tx.Exec(f.ctx, "SELECT 1 FROM "+f.table()+" WHERE scope = $1 AND key = $2 FOR UPDATE", "run-1", c.Key[:])
		require.NoError(t, err)

		var (
			wg      sync.WaitGroup
			cli     result
			holdErr error
		)
		operator := func() {
			cli = f.ctl("store", "-scope", "run-1", "-key", c.Key.String(), "-token", strconv.FormatInt(c.Token, 10), "-result", resultFile)
		}
		holder := func() { _, holdErr = f.st.Complete(f.ctx, c, success("holder")) }
		first, second := holder, operator
		if operatorFirst {
			first, second = operator, holder
		}
		wg.Go(first)
		f.awaitBlocked(1)
		wg.Go(second)
		f.awaitBlocked(2)
		require.NoError(t, tx.Rollback(f.ctx))
		wg.Wait()

		rec, err := f.st.Get(f.ctx, "run-1", c.Key)
		require.NoError(t, err)
		if operatorFirst {
			requireOK(t, cli)
			require.ErrorIs(t, holdErr, store.ErrLeaseLost, "the holder is fenced off")
			require.Equal(t, "operator", string(rec.Outcome.Result))
		} else {
			require.NoError(t, holdErr)
			requireOneLineFailure(t, cli, exitFail, "the record is completed")
			require.Equal(t, "holder", string(rec.Outcome.Result))
		}
	}
}
