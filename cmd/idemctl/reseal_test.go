package main

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/pgstore"
	"github.com/idemstore/idemstore/store/seal"
)

// sealKeys are random keys 1 and 2, and their text as a key file holds it.
type sealKeys struct {
	keys map[seal.KeyID][]byte
	text string
}

func newSealKeys(t *testing.T) sealKeys {
	t.Helper()
	k := sealKeys{keys: map[seal.KeyID][]byte{}}
	for _, id := range []seal.KeyID{1, 2} {
		b := make([]byte, seal.KeySize)
		_, err := rand.Read(b)
		require.NoError(t, err)
		k.keys[id] = b
		k.text += fmt.Sprintf("%d:%s\n", id, base64.StdEncoding.EncodeToString(b))
	}
	return k
}

// file writes the keys to a file of t's own and returns its path.
func (k sealKeys) file(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "seal.keys")
	require.NoError(t, os.WriteFile(p, []byte("# idemstore's keys\n"+k.text), 0o600))
	return p
}

// store opens a store on the fixture's schema sealing with key current of
// ids (current 0: no Sealer).
func (k sealKeys) store(f *fixture, current seal.KeyID, ids ...seal.KeyID) *pgstore.Store {
	f.t.Helper()
	var cfg pgstore.Config
	cfg.Schema = f.schema
	if len(ids) > 0 {
		keys := map[seal.KeyID][]byte{}
		for _, id := range ids {
			keys[id] = k.keys[id]
		}
		s, err := seal.New(seal.Config{Current: current, Keys: keys})
		require.NoError(f.t, err)
		cfg.Sealer = s
	}
	st, err := pgstore.New(f.ctx, f.admin, &cfg)
	require.NoError(f.t, err)
	f.t.Cleanup(st.Close)
	return st
}

// stored counts the completed records by how their result is stored:
// "clear" or "key N".
func (f *fixture) stored() map[string]int {
	f.t.Helper()
	rows, err := f.admin.Query(f.ctx, "SELECT encoding, result FROM "+f.table()+" WHERE status = 2")
	require.NoError(f.t, err)
	out := map[string]int{}
	var (
		enc    int16
		result []byte
	)
	_, err = pgx.ForEachRow(rows, []any{&enc, &result}, func() error {
		if enc == 1 {
			out["clear"]++
			return nil
		}
		id, _ := seal.KeyIDOf(result)
		out[fmt.Sprintf("key %d", id)]++
		return nil
	})
	require.NoError(f.t, err)
	return out
}

// An operator rotating to key 2 reseals: a dry run counts and changes
// nothing; the run moves every result in clear or under key 1 to key 2 in
// batches, after which the key-2 store alone reads them all; a second run
// finds nothing left.
func TestResealMovesEveryResultToTheCurrentKey(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	k := newSealKeys(t)
	keys := k.file(t)
	want := map[string]string{}
	for gen, st := range map[string]*pgstore.Store{"clear": f.st, "v1": k.store(f, 1, 1)} {
		for i := range 3 {
			id := fmt.Sprintf("%s-%d", gen, i)
			want[id] = `{"sent":"` + id + `"}`
			_, _, err := st.Put(f.ctx, "run-1", entry(id), success(want[id]), store.WriteOptions{})
			require.NoError(t, err)
		}
	}
	require.Equal(t, map[string]int{"clear": 3, "key 1": 3}, f.stored())

	r := f.ctl("reseal", "-seal-keys-file", keys, "-seal-current", "2", "-batch", "4", "-dry-run")
	requireOK(t, r)
	require.Equal(t, "dry run: 6 records would be resealed under key 2 (2 batch(es) read)\n", r.stdout)
	require.Equal(t, map[string]int{"clear": 3, "key 1": 3}, f.stored(), "a dry run changes nothing")

	r = f.ctl("reseal", "-seal-keys-file", keys, "-seal-current", "2", "-batch", "4")
	requireOK(t, r)
	require.Equal(t, "resealed 6 records under key 2 in 2 batch(es)\n", r.stdout)
	require.Equal(t, map[string]int{"key 2": 6}, f.stored())
	only2 := k.store(f, 2, 2)
	for id, result := range want {
		rec, err := only2.Get(f.ctx, "run-1", keyhash.IDKey(id))
		require.NoError(t, err, id)
		require.Equal(t, result, string(rec.Outcome.Result))
	}

	r = f.ctl("reseal", "-seal-keys-file", keys, "-seal-current", "2", "-json")
	requireOK(t, r)
	var out resealJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &out))
	require.Equal(t, resealJSON{KeyID: 2, Batches: 1}, out, "nothing left")
}

// A result that does not open (here one flipped byte) is listed and left
// as it is, the others are moved, and the command fails with one line.
func TestResealReportsResultsThatDoNotOpen(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	k := newSealKeys(t)
	v1 := k.store(f, 1, 1)
	for _, id := range []string{"good", "bad"} {
		_, _, err := v1.Put(f.ctx, "run-1", entry(id), success(id), store.WriteOptions{})
		require.NoError(t, err)
	}
	bad := keyhash.IDKey("bad")
	f.exec("UPDATE "+f.table()+" SET result = set_byte(result, 25, get_byte(result, 25) # 1) WHERE key = $1", bad[:])

	r := f.ctl("reseal", "-seal-keys-file", k.file(t), "-seal-current", "2")
	require.Equal(t, exitFail, r.code, r.stderr)
	require.Equal(t, "resealed 1 records under key 2 in 1 batch(es)\n"+
		"1 stored result(s) could not be opened:\n"+
		"  scope run-1 key "+bad.String()+": authentication failed: the result was changed, or moved from another record "+
		"(its scope, key, fingerprint or outcome kind differ from those it was sealed for)\n", r.stdout)
	require.Equal(t, "idemctl: reseal: 1 stored result(s) could not be opened and were left as they are (listed above): "+
		"configure the key that sealed them, or delete their scopes\n", r.stderr)
	require.Equal(t, map[string]int{"key 1": 1, "key 2": 1}, f.stored())
}

// The keys come from a file or the environment, and a bad one is refused
// before anything is read, without repeating any key.
func TestResealKeysAreCheckedFirst(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	k := newSealKeys(t)
	keys := k.file(t)
	badFile := filepath.Join(t.TempDir(), "bad.keys")
	short := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 16))
	require.NoError(t, os.WriteFile(badFile, []byte("1:"+short+"\n"), 0o600))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"reseal", "-seal-keys-file", keys}, "reseal needs the current key's id: -seal-current or $IDEMSTORE_SEAL_CURRENT"},
		{[]string{"reseal", "-seal-keys-file", keys, "-seal-current", "3"}, "Current: key id 3 is not one of Keys (1, 2)"},
		{[]string{"reseal", "-seal-keys-file", keys, "-seal-current", "two"}, `invalid -seal-current "two"`},
		{[]string{"reseal", "-seal-keys-file", keys, "-seal-current", base64.StdEncoding.EncodeToString(k.keys[1])}, "invalid -seal-current (44 bytes, not shown)"},
		{[]string{"reseal", "-seal-keys-file", badFile, "-seal-current", "1"}, "-seal-keys-file: entry 1: key id 1: the key has 16 bytes, want 32"},
		{[]string{"reseal", "-seal-keys-file", "/nonexistent/keys", "-seal-current", "1"}, `-seal-keys-file "/nonexistent/keys": no such file or directory`},
	} {
		r := f.ctl(tc.args...)
		requireOneLineFailure(t, r, exitUsage, tc.want)
		require.NotContains(t, r.stderr, short)
		for _, key := range k.keys {
			require.NotContains(t, r.stderr, base64.StdEncoding.EncodeToString(key))
		}
	}
	requireUsage(t, f.ctl("list", "-seal-keys-file", keys), "-seal-keys-file is not a flag of list")
}

// The environment gives the keys as it does to the services, and an
// outcome an operator stores with them is sealed like the services'.
func TestStoreAndResealTakeTheKeysFromTheEnvironment(t *testing.T) {
	// Not parallel: it sets the process's environment.
	f := newFixture(t)
	k := newSealKeys(t)
	t.Setenv(envSealKeys, strings.ReplaceAll(k.text, "\n", ","))
	t.Setenv(envSealCurrent, "2")
	requireOneLineFailure(t, f.ctl("reseal", "-seal-current", "9"), exitUsage, "Current: key id 9 is not one of Keys (1, 2)")

	c := f.abandoned("run-1", "mail")
	result := filepath.Join(t.TempDir(), "result")
	require.NoError(t, os.WriteFile(result, []byte(`{"sent":true,"id":"msg-42"}`), 0o600))
	requireOK(t, f.ctl("store", "-scope", "run-1", "-key", c.Key.String(), "-token", strconv.FormatInt(c.Token, 10), "-result", result))
	require.Equal(t, map[string]int{"key 2": 1}, f.stored(), "the operator's outcome is sealed")
	rec, err := k.store(f, 2, 1, 2).Get(f.ctx, "run-1", c.Key)
	require.NoError(t, err)
	require.Equal(t, `{"sent":true,"id":"msg-42"}`, string(rec.Outcome.Result))

	_, _, err = f.st.Put(f.ctx, "run-1", entry("clear"), success("in clear"), store.WriteOptions{})
	require.NoError(t, err)
	r := f.ctl("reseal")
	requireOK(t, r)
	require.Equal(t, "resealed 1 records under key 2 in 1 batch(es)\n", r.stdout)
	require.Equal(t, map[string]int{"key 2": 2}, f.stored())
}

// reseal needs what docs/operations.md grants idem_ops (it rewrites
// results); idem_ops_read may dry-run it.
func TestResealRunsAsTheOperatorWhoActs(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	readURL, opsURL := f.operatorRoles()
	k := newSealKeys(t)
	keys := k.file(t)
	_, _, err := f.st.Put(f.ctx, "run-1", entry("a"), success("a"), store.WriteOptions{})
	require.NoError(t, err)
	_, err = f.st.Claim(f.ctx, "run-1", entry("b"), time.Hour, store.WriteOptions{})
	require.NoError(t, err)

	requireOK(t, f.ctlAs(readURL, "reseal", "-seal-keys-file", keys, "-seal-current", "1", "-dry-run"))
	requireOneLineFailure(t, f.ctlAs(readURL, "reseal", "-seal-keys-file", keys, "-seal-current", "1"), exitFail, "permission denied")
	r := f.ctlAs(opsURL, "reseal", "-seal-keys-file", keys, "-seal-current", "1")
	requireOK(t, r)
	require.Equal(t, "resealed 1 records under key 1 in 1 batch(es)\n", r.stdout)
}
