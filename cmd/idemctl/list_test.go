package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/keyhash"
)

// list shows each kind of problem with what an operator needs to resolve
// it (scope, key, token), as a table or as JSON, and filters by scope.
func TestListShowsEachProblemAsATableAndAsJSON(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	r := f.ctl("list")
	requireOK(t, r)
	require.Equal(t, "nothing needs attention\n", r.stdout)

	abandoned := f.abandoned("run-1", "mail")
	stuck := f.stuck("run-1", "report")
	failing := f.failing("run-2", "charge", 3)
	f.claim("run-1", "fresh") // a call running now: not listed
	f.failing("run-1", "once", 1)

	r = f.ctl("list")
	requireOK(t, r)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	require.Len(t, lines, 4, r.stdout)
	require.Regexp(t, `^PROBLEM +SCOPE +KEY +TOOL +TOKEN +ATTEMPTS +CLAIMED +UPDATED +LAST ERROR$`, lines[0])
	body := strings.Join(lines[1:], "\n")
	require.Regexp(t, fmt.Sprintf(`outcome_unknown +run-1 +%s +send_mail +%d +1 `, abandoned.Key, abandoned.Token), body)
	require.Regexp(t, fmt.Sprintf(`stuck +run-1 +%s +send_mail +%d +1 `, stuck.Key, stuck.Token), body)
	require.Regexp(t, fmt.Sprintf(`failing +run-2 +%s +send_mail +%d +3 .* "smtp: 503 service unavailable"`, failing.Key, failing.Token), body)

	out := f.listed("-scope", "run-2")
	require.Len(t, out.Records, 1)
	got := out.Records[0]
	require.Equal(t, "failing", got.Problem)
	require.Equal(t, "run-2", got.Scope)
	require.Equal(t, failing.Key.String(), got.Key)
	require.Equal(t, keyhash.DownstreamKey("run-2", failing.Key), got.DownstreamKey)
	require.Equal(t, failing.Token, got.Token)
	require.Equal(t, "released", got.Status)
	require.Equal(t, 3, got.Attempts)
	require.Equal(t, "smtp: 503 service unavailable", got.LastError)
	require.Empty(t, out.Next, "one page")

	out = f.listed("-failing-attempts", "1", "-scope", "run-1")
	require.Len(t, out.Records, 3, "the failed-once call counts with -failing-attempts 1")
	out = f.listed("-stuck-after", "2h")
	require.Len(t, out.Records, 2, "held for an hour is not stuck after 2h")
}

// A long listing comes a page at a time: each full page ends with the
// cursor of the next, and -all follows them to the end; together the
// pages list every record once.
func TestListPagesWithTheCursor(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	want := map[string]bool{}
	for i := range 7 {
		c := f.abandoned(fmt.Sprintf("run-%d", i%3), fmt.Sprintf("call-%d", i))
		want[c.Key.String()] = true
	}

	seen := map[string]bool{}
	args := []string{"-limit", "3"}
	for pages := 1; ; pages++ {
		require.LessOrEqual(t, pages, 3)
		out := f.listed(args...)
		for _, r := range out.Records {
			require.False(t, seen[r.Key], "listed twice: %s", r.Key)
			seen[r.Key] = true
		}
		if out.Next == "" {
			require.Equal(t, 3, pages)
			break
		}
		require.Len(t, out.Records, 3)
		args = []string{"-limit", "3", "-after", out.Next}
	}
	require.Equal(t, want, seen)

	all := f.listed("-limit", "2", "-all")
	require.Len(t, all.Records, 7)
	require.Empty(t, all.Next)

	r := f.ctl("list", "-limit", "3", "-stuck-after", "1h")
	requireOK(t, r)
	require.Regexp(t, `\nnext page: idemctl -schema `+f.schema+` list -stuck-after 1h0m0s -limit 3 -after a1\.\S+\n$`, r.stdout,
		"the next page is of the same schema")
	require.Equal(t, "'it'\\''s a run'", shellQuote("it's a run"), "a scope is quoted for the shell")

	r = f.ctl("list", "-after", "not-a-cursor")
	requireOneLineFailure(t, r, exitUsage, `"not-a-cursor" is not a listing's cursor`)
	r = f.ctl("list", "-limit", "10001")
	requireOneLineFailure(t, r, exitUsage, "MaxAttentionLimit")
}
