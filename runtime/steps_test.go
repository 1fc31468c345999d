package runtime

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestAbbreviateKeepsShortOutputWhole(t *testing.T) {
	t.Parallel()
	require.Equal(t, `{"name":"Ada"}`, Abbreviate([]byte(`{"name":"Ada"}`), 100))
	require.Equal(t, strings.Repeat("é", 5), Abbreviate([]byte(strings.Repeat("é", 5)), 5), "the limit counts characters, not bytes")
}

func TestAbbreviateCutsLongOutputAndSaysHowLong(t *testing.T) {
	t.Parallel()
	out := []byte(strings.Repeat("é", 7)) // 14 bytes
	require.Equal(t, "ééééé… (14 bytes)", Abbreviate(out, 5))
	require.Equal(t, strings.Repeat("x", DefaultMaxStepOutput)+"… (150 bytes)", Abbreviate([]byte(strings.Repeat("x", 150)), 0))
}

func TestAbbreviateKeepsAStepOnOneLine(t *testing.T) {
	t.Parallel()
	require.Equal(t, "a b c", Abbreviate([]byte("a\nb\tc"), 100))
	require.Equal(t, "a\uFFFDb", Abbreviate([]byte("a\xffb"), 100))
}
