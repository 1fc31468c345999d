package pgstore

import (
	"bytes"
	"crypto/sha256"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/internal/pgtest"
	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store/pgstore/internal/pgsql"
)

// idemClaimDecides is idem_claim's rule (migration 4) as SQL over a row
// read with the call's fingerprint $3 and the Claim's nonce $4: the row
// decides unless it is dead, lapsed or released; the Claim won it when it
// is pending under its nonce.
const idemClaimDecides = `NOT ((expires_at <= now() AND NOT (status = 1 AND lease_until > now())) -- dead
	  OR (status = 1 AND lease_until <= now() AND fingerprint = $3)                      -- lapsed
	  OR status = 3),                                                                     -- released
	status = 1 AND claim_nonce IS NOT DISTINCT FROM $4`

// A claim's first looks decide in Go (decideFirstLook) from the record,
// its nonce and the database's clock what idem_claim decides in SQL under
// the row's lock: for every kind of record a claim can meet, at the
// boundaries too (a lease or a scope ending at the very time of the read),
// the two agree. A read with no nonce (ClaimMany's for stored calls) wins
// nothing; a row the statement inserted is the claim's.
func TestFirstLookDecidesByIdemClaimsRule(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, schema := pgtest.NewSchema(t)
	records := pgx.Identifier{schema, "idem_records"}.Sanitize()
	fp, other := sha256.Sum256([]byte("the call")), sha256.Sum256([]byte("another call"))
	nonce, otherNonce := bytes.Repeat([]byte{1}, nonceBytes), bytes.Repeat([]byte{2}, nonceBytes)
	cases := []struct {
		name    string
		status  int16
		fp      keyhash.Sum
		lease   string // the lease's end, from now; "" for none
		expires string // the scope's expiry, from now
		nonce   []byte
	}{
		{"completed", 2, fp, "", "1 hour", nil},
		{"completed, scope expired", 2, fp, "", "-1 hour", nil},
		{"completed, scope expiring now", 2, fp, "", "0", nil},
		{"completed of another call", 2, other, "", "1 hour", nil},
		{"completed of another call, scope expired", 2, other, "", "-1 hour", nil},
		{"pending", 1, fp, "1 minute", "1 hour", otherNonce},
		{"pending under the nonce", 1, fp, "1 minute", "1 hour", nonce},
		{"pending of another call", 1, other, "1 minute", "1 hour", otherNonce},
		{"pending, lease ending now", 1, fp, "0", "1 hour", otherNonce},
		{"pending, lapsed", 1, fp, "-1 minute", "1 hour", otherNonce},
		{"pending under the nonce, lapsed", 1, fp, "-1 minute", "1 hour", nonce},
		{"pending of another call, lapsed", 1, other, "-1 minute", "1 hour", otherNonce},
		{"pending, scope expired, lease live", 1, fp, "1 minute", "-1 hour", otherNonce},
		{"pending of another call, scope expired, lease live", 1, other, "1 minute", "-1 hour", otherNonce},
		{"pending of another call, scope expired, lapsed", 1, other, "-1 minute", "-1 hour", otherNonce},
		{"pending, scope and lease ending now", 1, fp, "0", "0", nonce},
		{"released", 3, fp, "-1 minute", "1 hour", otherNonce},
		{"released under the nonce", 3, fp, "-1 minute", "1 hour", nonce},
		{"released of another call", 3, other, "-1 minute", "1 hour", nil},
	}
	// One transaction: now() is the same in every statement, so a lease or
	// a scope ending "now" ends at the very time of the read.
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	// claimReadSQL's columns, then the rule's.
	read := pgsql.New(pgx.Identifier{schema}.Sanitize()).ClaimRead
	readWithRule := strings.Replace(read, "\nFROM ", ", "+idemClaimDecides+"\nFROM ", 1)
	require.NotEqual(t, read, readWithRule)
	replayRead := pgsql.New(pgx.Identifier{schema}.Sanitize()).ClaimReplay
	for _, c := range cases {
		key := sha256.Sum256([]byte(c.name))
		var outcome, encoding, result any
		if c.status == 2 {
			outcome, encoding, result = int16(1), int16(1), []byte("result")
		}
		lease := "NULL"
		if c.lease != "" {
			lease = "now() + interval '" + c.lease + "'"
		}
		_, err := tx.Exec(ctx, `INSERT INTO `+records+` (scope, key, status, tool, fingerprint, outcome_kind,
			encoding, result, token, lease_until, attempts, created_at, updated_at, expires_at, claimed_at, claim_nonce)
			VALUES ('run', $1, $2, 'send_mail', $3, $4, $5, $6, 7, `+lease+`, 1, now(), now(),
			now() + interval '`+c.expires+`', now(), $7)`,
			key[:], c.status, c.fp[:], outcome, encoding, result, c.nonce)
		require.NoError(t, err, c.name)

		var (
			row                recordScan
			look               lookColumns
			wantDecides, wantW bool
		)
		require.NoError(t, queryRow(ctx, tx, readWithRule, []any{"run", key[:], fp[:], nonce},
			row.targets(&look.nonce, &look.now, &wantDecides, &wantW)...), c.name)
		decides, won := row.decideFirstLook(look, fp, nonce)
		require.Equal(t, [2]bool{wantDecides, wantW}, [2]bool{decides, won}, "%s: decides, won", c.name)
		_, won = row.decideFirstLook(look, fp, nil)
		require.False(t, won, "%s: a read without a nonce wins nothing", c.name)
		look.inserted = true
		decides, won = row.decideFirstLook(look, fp, nonce)
		require.True(t, decides && won, "%s: a row the statement inserted is the claim's", c.name)

		// claimReplaySQL's columns decide a replay, or leave the key to
		// the claim, as the rule does; what they cannot decide is read
		// again, and only a record pending or of another call is.
		var (
			replay recordScan
			now    time.Time
		)
		require.NoError(t, queryRow(ctx, tx, replayRead, []any{"run", key[:]},
			&replay.status, &replay.fingerprint, &replay.outcomeKind, &replay.encoding, &replay.result, &replay.expiresAt, &now), c.name)
		require.True(t, now.Equal(look.now), "%s: one transaction, one clock", c.name)
		switch replay.decideReplayLook(now, fp) {
		case replayLookReplays:
			require.True(t, wantDecides && !wantW && c.status == 2 && c.fp == fp, "%s: replayed, the rule says decides %v, won %v", c.name, wantDecides, wantW)
		case replayLookClaims:
			require.False(t, wantDecides, "%s: left to the claim, the rule decides", c.name)
		default:
			require.True(t, c.status == 1 || c.fp != fp, "%s: read again", c.name)
		}
	}
}
