package doctest

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/internal/pgtest"
	"github.com/idemstore/idemstore/store/pgstore"
)

const grantsFile = "deploy/grants.sql"

var grantVarRE = regexp.MustCompile(`:"(schema|app_role|ops_read_role|ops_role)"`)

// deploy/grants.sql, with its default names, is the page's runtime-grants
// and operator-grants blocks, statement for statement; and its defaults are
// the page's names.
func TestDeployGrantsAreThePagesGrants(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join(root, grantsFile))
	require.NoError(t, err)
	defaults := map[string]string{"schema": "idemstore", "app_role": "idem_app", "ops_read_role": "idem_ops_read", "ops_role": "idem_ops"}
	var got []string
	for _, l := range strings.Split(string(data), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "--") || strings.HasPrefix(l, `\`) {
			continue
		}
		got = append(got, grantVarRE.ReplaceAllStringFunc(l, func(v string) string { return defaults[strings.Trim(v, `:"`)] }))
	}
	var want []string
	for _, name := range []string{"runtime-grants", "operator-grants"} {
		b := tested(t, operationsPage, name)
		require.Equal(t, "idem_migrator", b.marks["as"])
		want = append(want, strings.Split(strings.TrimSpace(b.text), "\n")...)
	}
	require.Equal(t, want, got)

	// The defaults psql sets when no -v names them.
	buildTools(t)
	prelude, _, ok := strings.Cut(string(data), "\nGRANT ")
	require.True(t, ok)
	file := filepath.Join(t.TempDir(), "defaults.sql")
	require.NoError(t, os.WriteFile(file, []byte(prelude+"\n\\echo :schema :app_role :ops_read_role :ops_role\n"), 0o600))
	out, err := exec.Command(tools.psql, pgtest.URL(t), "-X", "-v", "ON_ERROR_STOP=1", "-f", file).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Equal(t, "idemstore idem_app idem_ops_read idem_ops\n", string(out))
}

// The image of deploy/build-image.sh runs the init container's command of
// docs/operations.md as written: migrate up, then the grants, after which
// the services' role is ready; the image's idemctl works too.
func TestDeployImageMigratesAndGrants(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("docker"); err != nil || exec.Command("docker", "image", "inspect", pgtest.LocalImage).Run() != nil {
		msg := "doctest: building the deploy image needs Docker and " + pgtest.LocalImage + " (make pg-image) as its base"
		if ci := os.Getenv(pgtest.EnvCI); ci != "" && ci != "false" && ci != "0" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	p := newPage(t)
	for _, name := range []string{"dba-setup", "operator-setup"} {
		out, err := p.psql("dba", p.fill(tested(t, operationsPage, name).text), nil)
		require.NoError(t, err, out)
	}

	var b [4]byte
	_, err := rand.Read(b[:])
	require.NoError(t, err)
	image := "idemstore-tools-doctest:" + hex.EncodeToString(b[:])
	build := exec.CommandContext(p.ctx, "bash", filepath.Join(root, "deploy", "build-image.sh"), image)
	// The base has psql; cgo on shares the build cache with the tests' own
	// builds (the base is Debian, glibc is there).
	build.Env = append(os.Environ(), "BASE_IMAGE="+pgtest.LocalImage, "CGO_ENABLED=1")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "deploy/build-image.sh:\n%s", out)
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", "-f", image).Run() })

	script := initContainerScript(t)
	// The page's names become the test's, except in the image's path.
	script = strings.ReplaceAll(script, "-f /etc/idemstore/grants.sql", "-f @grants@")
	script = strings.ReplaceAll(p.fill(script), "-f @grants@", p.grantVars()+" -f /etc/idemstore/grants.sql")
	run := exec.CommandContext(p.ctx, "docker", "run", "--rm", "--network", "host",
		"-e", "DATABASE_URL="+p.url("idem_migrator"), image, "/bin/sh", "-ec", script)
	out, err = run.CombinedOutput()
	require.NoError(t, err, "the init container's command:\n%s", out)
	require.Contains(t, string(out), "schema "+p.schema+" is at version")

	pool, err := pgxpool.New(p.ctx, p.url("idem_app"))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	require.NoError(t, pgstore.CheckPrivileges(p.ctx, pool, p.schema, pgstore.AccessCalls), "the services' role is ready")

	out, err = exec.CommandContext(p.ctx, "docker", "run", "--rm", "--network", "host", "-e", "DATABASE_URL="+p.url("idem_ops_read"),
		image, "idemctl", "-schema", p.schema, "ready", "-access", "inspect").CombinedOutput()
	require.NoError(t, err, "%s", out)
}

// initContainerScript is the shell script of the page's init container.
func initContainerScript(t *testing.T) string {
	t.Helper()
	b := tested(t, operationsPage, "init-container")
	_, rest, ok := strings.Cut(b.text, "      args:\n        - |\n")
	require.True(t, ok, "%s: no args script", b)
	var lines []string
	for _, l := range strings.Split(rest, "\n") {
		body, ok := strings.CutPrefix(l, "          ")
		if !ok {
			break
		}
		lines = append(lines, body)
	}
	require.NotEmpty(t, lines)
	return strings.Join(lines, "\n")
}
