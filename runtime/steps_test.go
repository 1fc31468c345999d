package runtime_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	agent "github.com/idemstore/idemstore/runtime"
)

func TestAbbreviateKeepsShortOutputWhole(t *testing.T) {
	t.Parallel()
	require.Equal(t, `{"name":"Ada"}`, agent.Abbreviate([]byte(`{"name":"Ada"}`), 100))
	require.Equal(t, strings.Repeat("é", 5), agent.Abbreviate([]byte(strings.Repeat("é", 5)), 5), "the limit counts characters, not bytes")
}

func TestAbbreviateCutsLongOutputAndSaysHowLong(t *testing.T) {
	t.Parallel()
	out := []byte(strings.Repeat("é", 7)) // 14 bytes
	require.Equal(t, "ééééé… (14 bytes)", agent.Abbreviate(out, 5))
	require.Equal(t, strings.Repeat("x", agent.DefaultMaxStepOutput)+"… (150 bytes)", agent.Abbreviate([]byte(strings.Repeat("x", 150)), 0))
}

func TestAbbreviateKeepsAStepOnOneLine(t *testing.T) {
	t.Parallel()
	require.Equal(t, "a b c", agent.Abbreviate([]byte("a\nb\tc"), 100))
	require.Equal(t, "a\uFFFDb", agent.Abbreviate([]byte("a\xffb"), 100))
}
