package doctest

import (
	"os"
	"strconv"
	"testing"

	"github.com/idemstore/idemstore/internal/pgtest"
)

func TestMain(m *testing.M) {
	code := pgtest.Main(m)
	if tools.dir != "" {
		_ = os.RemoveAll(tools.dir)
	}
	os.Exit(code)
}

func itoa(i int) string { return strconv.Itoa(i) }
