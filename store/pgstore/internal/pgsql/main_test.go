package pgsql_test

import (
	"os"
	"testing"

	"github.com/idemstore/idemstore/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
