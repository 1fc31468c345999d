package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/executor"
	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
)

func TestBadCommandLinesAreUsageErrors(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"no command":         {[]string{}, "no command"},
		"unknown command":    {[]string{"resolve"}, `unknown command "resolve"`},
		"two commands":       {[]string{"list", "counts"}, `unexpected argument "counts" after list`},
		"unknown flag":       {[]string{"-frobnicate", "list"}, `unknown flag "-frobnicate"`},
		"flag of another":    {[]string{"counts", "-note", "x"}, "-note is not a flag of counts"},
		"bad duration":       {[]string{"list", "-stuck-after", "soon"}, `invalid -stuck-after "soon"`},
		"zero timeout":       {[]string{"-timeout", "0s", "list"}, `invalid -timeout "0s"`},
		"negative limit":     {[]string{"list", "-limit", "-1"}, `invalid -limit "-1"`},
		"token not a number": {[]string{"release", "-token", "x"}, `invalid -token "x"`},
		"missing scope":      {[]string{"key", "-tool", "send_mail"}, "key needs -scope"},
		"-yes elsewhere":     {[]string{"list", "-yes"}, "-yes is not a flag of list"},
		// A duration over the stores' longest is refused: the message
		// must say so, not ask a positive value for a positive one.
		"duration over the longest": {[]string{"scope", "extend", "-scope", "s", "-ttl", "1000000h"}, `invalid -ttl "1000000h": want a positive duration such as 30s or 5m, at most 876000h (100 years)`},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			requireUsage(t, runCtl(tc.args...), tc.want)
		})
	}
}

func TestNoDatabaseURLAndAMalformedOneAreUsageErrors(t *testing.T) {
	// Not parallel: it clears DATABASE_URL for the whole process.
	t.Setenv("DATABASE_URL", "")
	requireOneLineFailure(t, runCtl("counts"), exitUsage, "set -database-url or DATABASE_URL")
	r := runCtl("-database-url", "postgres://user:s3cr3t@localhost:notaport/db", "counts")
	requireOneLineFailure(t, r, exitUsage, `malformed database URL: "invalid port"`)
	require.NotContains(t, r.stderr, "s3cr3t")
	requireOneLineFailure(t, runCtl("-database-url", "postgres://u:p@127.0.0.1:1/db", "-schema", "Bad", "counts"),
		exitUsage, `invalid -schema: "Bad" does not match`)
}

func TestEmptyDatabaseURLFlagIsRefusedNotTakenFromTheEnvironment(t *testing.T) {
	// Not parallel: it sets DATABASE_URL for the whole process. The
	// environment's database is unreachable: had the command used it, it
	// would fail with exit status 1 trying to connect.
	t.Setenv("DATABASE_URL", "postgres://u:s3cr3t@127.0.0.1:1/prod?connect_timeout=1")
	for _, args := range [][]string{
		{"-database-url", "", "scope", "delete", "-scope", "run-1", "-yes"},
		{"cleanup", "-database-url="},
		{"-database-url", "postgres://127.0.0.1:1/staging", "-database-url", "", "counts"},
	} {
		requireOneLineFailure(t, runCtl(args...), exitUsage, "-database-url is empty: give the database's URL, or leave the flag out")
	}
	// The flag left out still means $DATABASE_URL.
	requireOneLineFailure(t, runCtl("counts"), exitFail, "cannot reach the database")
}

// An optional flag given empty is a usage error, never read as the flag
// left out: `key -id "$CALL_ID"` with the variable unset printed the key of a
// call without an invocation id (another call's), `list -scope "$RUN"` listed
// every scope, and an empty -seal-keys-file took the keys of the
// environment. The flag left out keeps its meaning.
func TestOptionalFlagsGivenEmptyAreUsageErrors(t *testing.T) {
	// Not parallel: it sets the process's environment. The environment's
	// database is unreachable and its keys are good: a command that used
	// them would fail with exit status 1 trying to connect.
	t.Setenv("DATABASE_URL", "postgres://u:s3cr3t@127.0.0.1:1/prod?connect_timeout=1")
	k := newSealKeys(t)
	t.Setenv(envSealKeys, strings.ReplaceAll(k.text, "\n", ","))
	t.Setenv(envSealCurrent, "2")
	for want, args := range map[string][]string{
		"-id is empty":             {"key", "-scope", "run-1", "-tool", "send_mail", "-id", ""},
		"-args is empty":           {"key", "-scope", "run-1", "-tool", "send_mail", "-args="},
		"-args-file is empty":      {"key", "-scope", "run-1", "-tool", "send_mail", "-args-file", ""},
		"-scope is empty":          {"list", "-scope", ""},
		"-after is empty":          {"list", "-after="},
		"-seal-keys-file is empty": {"reseal", "-seal-keys-file", ""},
		"-seal-current is empty":   {"reseal", "-seal-current", ""},
	} {
		requireUsage(t, runCtl(args...), want)
	}
	requireUsage(t, runCtl("key", "-scope", "", "-tool", "send_mail"), "key needs -scope")

	// Left out, each keeps its meaning.
	r := runCtl("key", "-scope", "run-1", "-tool", "send_mail")
	require.Equal(t, exitOK, r.code, r.stderr)
	requireOneLineFailure(t, runCtl("list"), exitFail, "cannot reach the database")
	requireOneLineFailure(t, runCtl("reseal"), exitFail, "cannot reach the database")
}

func TestUnreachableServerIsOneLine(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	require.NoError(t, l.Close())
	r := runCtl("-database-url", "postgres://u:p@127.0.0.1:"+port+"/db", "list")
	requireOneLineFailure(t, r, exitFail, `cannot reach the database at "127.0.0.1:`+port+`": `)
	require.Contains(t, r.stderr, "connection refused")
}

func TestHelpListsCommandsFlagsAndExitStatuses(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"-h"}, {"list", "-h"}} {
		r := runCtl(args...)
		require.Equal(t, exitOK, r.code)
		for name := range commands {
			require.Contains(t, r.stderr, "  "+name+" ")
		}
		for _, flag := range []string{"-database-url", "-schema", "-connect-timeout", "-timeout", "-json", "-after", "-note", "-result"} {
			require.Contains(t, r.stderr, flag)
		}
		for _, c := range exitCodes {
			require.Contains(t, r.stderr, fmt.Sprintf("  %d  %s\n", c.code, c.meaning))
		}
	}
}

// One table of exit statuses and commands: the one -h prints is the one the
// operations page shows.
func TestTheOperationsPageDocumentsEveryCommandAndExitStatus(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/operations.md")
	require.NoError(t, err)
	for _, c := range exitCodes {
		row := fmt.Sprintf("| `%d` | %s |", c.code, c.meaning)
		require.True(t, strings.Contains(string(doc), row), "docs/operations.md lacks the row %s", row)
	}
	for name := range commands {
		require.True(t, strings.Contains(string(doc), "idemctl "+name), "docs/operations.md shows idemctl %s", name)
	}
}

// A user's value repeated in an error is a bounded prefix.
func TestHugeValuesAreEchoedAsABoundedPrefix(t *testing.T) {
	t.Parallel()
	huge := strings.Repeat("A", 100<<10)
	for name, args := range map[string][]string{
		"command": {huge},
		"flag":    {"-" + huge, "list"},
		"timeout": {"-timeout", huge, "list"},
		"token":   {"release", "-token", huge},
		"schema":  {"-database-url", "postgres://u:p@127.0.0.1:1/db", "-schema", huge, "list"},
		"key":     {"key", "-scope", huge, "-tool", "t"},
		"tool":    {"key", "-scope", "s", "-tool", huge},
		"args":    {"key", "-scope", "s", "-tool", "t", "-args", "[" + huge},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := runCtl(args...)
			require.Equal(t, exitUsage, r.code, r.stderr)
			require.Less(t, len(r.stderr), 1000)
		})
	}
}

// key prints what the executor derives for a call, so an operator finds
// its row (key) and its charge at the payment provider (downstream key);
// argument order and spacing do not matter, as for the executor.
func TestKeyPrintsTheCallsKeyAndDownstreamKey(t *testing.T) {
	t.Parallel()
	args := `{"to":"ada@example.com","subject":"Welcome"}`
	ent, err := executor.EntryOf(executor.Call{Tool: "send_mail", Args: []byte(args)}, store.Limits{})
	require.NoError(t, err)

	r := runCtl("key", "-scope", "run-1", "-tool", "send_mail", "-args", `{ "subject": "Welcome", "to": "ada@example.com" }`)
	requireOK(t, r)
	require.Equal(t, fmt.Sprintf("key             %s\ndownstream key  %s\nfingerprint     %s\n",
		ent.Key, keyhash.DownstreamKey("run-1", ent.Key), ent.Fingerprint), r.stdout)

	r = runCtlIn(t.Context(), strings.NewReader(args), "key", "-scope", "run-1", "-tool", "send_mail", "-args-file", "-", "-id", "order-7", "-json")
	requireOK(t, r)
	var got keyJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &got))
	require.Equal(t, keyhash.IDKey("order-7").String(), got.Key, "an invocation id is the key")
	require.Equal(t, keyhash.DownstreamKey("run-1", keyhash.IDKey("order-7")), got.DownstreamKey)

	requireOneLineFailure(t, runCtl("key", "-scope", "run-1", "-tool", "send_mail", "-args", `{"a":1,"a":2}`),
		exitUsage, "duplicate")
	requireOneLineFailure(t, runCtl("key", "-scope", "run-1", "-tool", "t", "-args", "{}", "-args-file", "x"),
		exitUsage, "give -args or -args-file, not both")
}

// -yes=false is a no: scope delete is refused before anything runs, as
// without -yes, rather than deleting the scope.
func TestScopeDeleteWithYesFalseIsRefused(t *testing.T) {
	t.Parallel()
	for _, yes := range []string{"-yes=false", "-yes=0", "-yes=f"} {
		requireUsage(t, runCtl("-database-url", "postgres://u:p@127.0.0.1:1/db", "scope", "delete", "-scope", "run-1", yes),
			"scope delete needs -yes")
	}
}

// A file flag naming a directory is a bad value: exit status 2 and its
// name as a bounded prefix, not a read failure that repeats the whole
// path; and arguments over the limit name MaxArgBytes, the limit they
// broke.
func TestArgsFileThatIsADirectoryOrTooLargeIsAUsageErrorNamingTheProblem(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	deep := dir
	for range 30 { // about 3 KB, under PATH_MAX
		deep = filepath.Join(deep, strings.Repeat("d", 100))
	}
	require.NoError(t, os.MkdirAll(deep, 0o700))
	for _, d := range []string{dir, deep} {
		r := runCtl("key", "-scope", "s", "-tool", "t", "-args-file", d)
		requireOneLineFailure(t, r, exitUsage, "is a directory")
		require.Contains(t, r.stderr, "-args-file "+strconv.Quote(d[:min(len(d), 64)]))
		require.Less(t, len(r.stderr), 300)
	}
	big := filepath.Join(dir, "big.json")
	require.NoError(t, os.WriteFile(big, []byte(`"`+strings.Repeat("x", 1<<20)+`"`), 0o600))
	requireOneLineFailure(t, runCtl("key", "-scope", "s", "-tool", "t", "-args-file", big), exitUsage, "limit MaxArgBytes is 1048576")
}

// A -seal-keys-file that is no key file (a device, a huge file named by
// mistake) is refused after a bounded read, not read whole: /dev/zero
// would never end.
func TestSealKeysFileIsReadBounded(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]string{"/dev/zero": "over 1048576 bytes: not a key file", "/": "is a directory"} {
		r := runCtl("-database-url", "postgres://u:p@127.0.0.1:1/db", "reseal", "-seal-keys-file", name, "-seal-current", "1")
		requireOneLineFailure(t, r, exitUsage, "-seal-keys-file "+strconv.Quote(name)+": "+want)
	}
}

// A bad -key, -kind or -access is refused (exit status 2, one line naming
// it) before the database is opened: a database that cannot be reached
// does not hide it behind exit status 1.
func TestBadValuesAreRefusedBeforeConnecting(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	url := "postgres://u:p@" + l.Addr().String() + "/db"
	require.NoError(t, l.Close())
	key := strings.Repeat("ab", 32)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"release", "-scope", "s", "-key", "abc", "-token", "1", "-note", "x"}, `release: invalid -key "abc"`},
		{[]string{"store", "-scope", "s", "-key", "zz", "-token", "1", "-result", "-"}, `store: invalid -key "zz"`},
		{[]string{"store", "-scope", "s", "-key", key, "-token", "1", "-result", "-", "-kind", "maybe"}, `store: invalid -kind "maybe"`},
		{[]string{"ready", "-access", "root"}, `ready: invalid -access "root"`},
	} {
		requireOneLineFailure(t, runCtl(append([]string{"-database-url", url}, tc.args...)...), exitUsage, tc.want)
	}
}
