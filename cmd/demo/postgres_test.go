package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/internal/pgtest"
)

// demoArgsEnv carries the demo's arguments to a child process (see TestMain).
const demoArgsEnv = "IDEMSTORE_DEMO_ARGS"

var sendMailRuns = regexp.MustCompile(`(?m)^side effects: send_mail ran (\d+) times?$`)

func sendMailCount(t *testing.T, out string) int {
	t.Helper()
	m := sendMailRuns.FindStringSubmatch(out)
	require.NotNil(t, m, "no send_mail count in:\n%s", out)
	n, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	return n
}

func TestSecondRunOnPostgresReplaysEverySideEffect(t *testing.T) {
	t.Parallel()
	_, schema := pgtest.NewSchema(t)
	requireSecondRunReplays(t, pgtest.URL(t), schema)
}

// requireSecondRunReplays runs the retry scenario twice in one scope of the
// database: the first run sends the mail once, the second replays every
// call, the first attempt included, and sends nothing.
func requireSecondRunReplays(t *testing.T, databaseURL, schema string) {
	t.Helper()
	opts := options{scope: "run-twice", scenario: "retry", databaseURL: databaseURL, schema: schema}

	var first, second bytes.Buffer
	require.NoError(t, run(context.Background(), &first, opts))
	require.Equal(t, 1, sendMailCount(t, first.String()), first.String())

	require.NoError(t, run(context.Background(), &second, opts))
	out := second.String()
	require.Contains(t, out, "PostgreSQL store")
	require.Contains(t, out, "Attempt 1 of 3\n  lookup_customer reused cached result: ", "the first attempt already replays")
	require.Contains(t, out, "  send_mail reused cached result: ")
	require.True(t, strings.HasSuffix(out, "side effects: send_mail ran 0 times\n"), out)
}

// Several demo processes started at once in one new scope (-execution-id) send the
// mail once in total: the others wait for the claim's outcome and replay it.
func TestConcurrentDemoProcessesSendTheMailOnceInTotal(t *testing.T) {
	t.Parallel()
	_, schema := pgtest.NewSchema(t)
	requireConcurrentDemosSendOnce(t, pgtest.URL(t), schema)
}

// requireConcurrentDemosSendOnce starts 4 demo processes at once in one new
// scope of the database and checks that they sent the mail once in total.
func requireConcurrentDemosSendOnce(t *testing.T, databaseURL, schema string) {
	t.Helper()
	args := fmt.Sprintf("-database-url %s -schema %s -execution-id at-once", databaseURL, schema)

	const processes = 4
	outs := make([]string, processes)
	var wg sync.WaitGroup
	for i := range processes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(os.Args[0])
			cmd.Env = append(os.Environ(), demoArgsEnv+"="+args)
			out, err := cmd.CombinedOutput()
			outs[i] = string(out)
			if err != nil {
				outs[i] += "\nexit: " + err.Error()
			}
		}()
	}
	wg.Wait()

	total := 0
	for _, out := range outs {
		total += sendMailCount(t, out)
	}
	t.Logf("the processes said:\n%s", strings.Join(outs, "\n----\n"))
	require.Equal(t, 1, total, "send_mail ran %d times in total:\n%s", total, strings.Join(outs, "\n----\n"))
}

func TestUnmigratedSchemaNamesTheMigrateCommand(t *testing.T) {
	t.Parallel()
	_, schema := pgtest.NewEmptySchema(t)
	err := run(context.Background(), &bytes.Buffer{}, options{scope: "x", scenario: "retry", databaseURL: pgtest.URL(t), schema: schema})
	require.ErrorContains(t, err, "schema not migrated")
	require.ErrorContains(t, err, "cmd/migrate -schema "+schema+" up")
}

func TestMalformedDatabaseURLGivesOneClearLine(t *testing.T) {
	t.Parallel()
	err := run(context.Background(), &bytes.Buffer{}, options{scope: "x", scenario: "retry", databaseURL: "postgres://u:secret@[::1", schema: "idemstore"})
	require.ErrorContains(t, err, "-database-url is not a valid PostgreSQL URL")
	require.NotContains(t, err.Error(), "secret")
}
