package doctest

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/internal/pgtest"
)

// tools are the commands the pages run, built once per test binary: migrate
// and idemctl from this module, and the machine's psql.
var tools struct {
	once sync.Once
	dir  string // holds migrate and idemctl-bin
	psql string
	err  error
}

// buildTools builds the module's commands into a directory of their own and
// finds psql (on PATH, else in PostgreSQL's Debian directory). Without psql
// the test is skipped when run by hand and fails in CI, like a missing
// database (pgtest).
func buildTools(t *testing.T) {
	t.Helper()
	tools.once.Do(func() {
		if tools.dir, tools.err = os.MkdirTemp("", "idemstore-doctest-"); tools.err != nil {
			return
		}
		for _, cmd := range []string{"migrate", "idemctl"} {
			out, err := buildCmd(cmd).CombinedOutput()
			if err != nil {
				tools.err = &buildError{cmd: cmd, out: string(out), err: err}
				return
			}
		}
		tools.psql, _ = exec.LookPath("psql")
		if tools.psql == "" {
			found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/psql")
			if len(found) > 0 {
				tools.psql = found[len(found)-1]
			}
		}
	})
	require.NoError(t, tools.err)
	if tools.psql == "" {
		msg := "doctest: the pages run psql, and none is installed (apt-get install postgresql-client)"
		if os.Getenv(pgtest.EnvCI) != "" && os.Getenv(pgtest.EnvCI) != "false" && os.Getenv(pgtest.EnvCI) != "0" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
}

type buildError struct {
	cmd, out string
	err      error
}

func (e *buildError) Error() string {
	return "go build ./cmd/" + e.cmd + ": " + e.err.Error() + "\n" + e.out
}

func buildCmd(cmd string) *exec.Cmd {
	c := exec.Command("go", "build", "-o", filepath.Join(tools.dir, cmd+"-bin"), "./cmd/"+cmd)
	c.Dir = root
	return c
}
