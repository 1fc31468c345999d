package doctest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// root is the module's root, from this package's directory.
const root = "../.."

// block is one fenced block of a Markdown page, with the markers in the
// HTML comments right above it.
type block struct {
	page  string // path from the module root
	line  int    // of the opening fence
	lang  string // "go", "sql", "sh", "console", …
	text  string
	marks map[string]string // "tested", "as", "go", "console" → value
}

func (b block) String() string { return b.page + ":" + itoa(b.line) }

var markRE = regexp.MustCompile(`^<!-- ([a-z]+): (.*) -->$`)

// blocks reads every fenced block of page.
func blocks(t *testing.T, page string) []block {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, page))
	require.NoError(t, err)
	lines := strings.Split(string(data), "\n")
	var (
		out   []block
		marks = map[string]string{}
	)
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if m := markRE.FindStringSubmatch(l); m != nil {
			marks[m[1]] = m[2]
			continue
		}
		if lang, ok := strings.CutPrefix(l, "```"); ok {
			b := block{page: page, line: i + 1, lang: strings.TrimSpace(lang), marks: marks}
			var body []string
			for i++; i < len(lines) && !strings.HasPrefix(lines[i], "```"); i++ {
				body = append(body, lines[i])
			}
			require.Less(t, i, len(lines), "%s: unterminated block", b)
			b.text = strings.Join(body, "\n") + "\n"
			out = append(out, b)
		}
		if strings.TrimSpace(l) != "" {
			marks = map[string]string{}
		}
	}
	return out
}

// tested returns the block of page marked <!-- tested: name -->.
func tested(t *testing.T, page, name string) block {
	t.Helper()
	for _, b := range blocks(t, page) {
		if b.marks["tested"] == name {
			return b
		}
	}
	t.Fatalf("%s has no block marked tested: %s", page, name)
	return block{}
}

// pages are the Markdown pages whose blocks the tests hold to account.
func pages(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	out := []string{"README.md"}
	for _, d := range docs {
		rel, err := filepath.Rel(root, d)
		require.NoError(t, err)
		out = append(out, rel)
	}
	return out
}
