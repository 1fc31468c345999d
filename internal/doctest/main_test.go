package doctest

import (
	"os"
	"strconv"
	"testing"

	"github.com/idemstore/idemstore/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func itoa(i int) string { return strconv.Itoa(i) }
