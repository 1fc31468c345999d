package doctest

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// docTestName is a test or fuzz target a page names as the proof of a
// guarantee: TestX, or TestX* / TestX… for every test whose name starts so.
var docTestName = regexp.MustCompile(`\b((?:Test|Fuzz)[A-Z][A-Za-z0-9_]*)(\*|…)?`)

// docCase is a case of the exported conformance suite a page names:
// storetest/Name, a subtest every store's conformance test runs.
var docCase = regexp.MustCompile(`storetest/([A-Z][A-Za-z0-9]*)`)

// testFunc is a test, fuzz target or benchmark declared in a _test.go file.
var testFunc = regexp.MustCompile(`(?m)^func ((?:Test|Fuzz)[A-Za-z0-9_]*)\(`)

// Every test a user-facing page names as the proof of a guarantee exists:
// a test renamed or removed without its page leaves the guarantee
// unproven while the page still says it is (guarantees.md once named a
// memstore test a rename had removed).
func TestEveryTestThePagesNameExists(t *testing.T) {
	t.Parallel()
	declared := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != root) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range testFunc.FindAllSubmatch(src, -1) {
			declared[string(m[1])] = true
		}
		return nil
	})
	require.NoError(t, err)
	require.Contains(t, declared, "TestEveryTestThePagesNameExists", "the walk finds this file")

	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	pages = append(pages, filepath.Join(root, "README.md"))
	suite := conformanceSource(t)
	var missing []string
	for _, page := range pages {
		text, err := os.ReadFile(page)
		require.NoError(t, err)
		for _, m := range docCase.FindAllStringSubmatch(string(text), -1) {
			if !strings.Contains(suite, `"`+m[1]+`"`) {
				missing = append(missing, filepath.Base(page)+": "+m[0])
			}
		}
		for _, m := range docTestName.FindAllStringSubmatch(string(text), -1) {
			name, prefix := m[1], m[2] != ""
			if !exists(declared, name, prefix) {
				missing = append(missing, filepath.Base(page)+": "+m[0])
			}
		}
	}
	sort.Strings(missing)
	require.Empty(t, missing, "tests the pages name that no _test.go declares")
}

// conformanceSource is the source of store/storetest, where every case is
// named by a string literal.
func conformanceSource(t *testing.T) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "store", "storetest", "*.go"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	var b strings.Builder
	for _, f := range files {
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		b.Write(src)
	}
	return b.String()
}

// exists reports whether a test is declared under name, or, for a prefix,
// whether one's name starts with it.
func exists(declared map[string]bool, name string, prefix bool) bool {
	if !prefix {
		return declared[name]
	}
	for d := range declared {
		if strings.HasPrefix(d, name) {
			return true
		}
	}
	return false
}
