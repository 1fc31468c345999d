package doctest

import (
	"bufio"
	"bytes"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// packages are the imports a snippet may use without saying so, by the name
// the pages use. A page's snippet is a fragment; these are the imports its
// prose implies.
var packages = map[string]string{
	"context":     "context",
	"fmt":         "fmt",
	"json":        "encoding/json",
	"log":         "log",
	"strconv":     "strconv",
	"time":        "time",
	"pgx":         "github.com/jackc/pgx/v5",
	"pgxpool":     "github.com/jackc/pgx/v5/pgxpool",
	"executor":    "github.com/idemstore/idemstore/executor",
	"keyhash":     "github.com/idemstore/idemstore/keyhash",
	"migrations":  "github.com/idemstore/idemstore/migrations",
	"store":       "github.com/idemstore/idemstore/store",
	"memstore":    "github.com/idemstore/idemstore/store/memstore",
	"pgstore":     "github.com/idemstore/idemstore/store/pgstore",
	"agent":       "github.com/idemstore/idemstore/runtime",
	"openaimodel": "github.com/idemstore/idemstore/runtime/openaimodel",
	"openaitest":  "github.com/idemstore/idemstore/runtime/openaimodel/openaitest",
	"http":        "net/http",
	"exec":        "os/exec",
	"httpidem":    "github.com/idemstore/idemstore/httpidem",
	"idemotel":    "github.com/idemstore/idemstore/idemotel",
	"mcptools":    "github.com/idemstore/idemstore/mcptools",
	"mcp":         "github.com/modelcontextprotocol/go-sdk/mcp",
	"os":          "os",
	"seal":        "github.com/idemstore/idemstore/store/seal",
}

// preludes are, per snippet (its <!-- go: name --> marker), the
// declarations of what its text takes as given: a context, a pool, a store
// of a concrete type, the tool. A snippet that needs more than this does
// not compile, and is a snippet to fix.
var preludes = map[string]string{
	"readme-usage": `var (
	ctx      context.Context
	sendMail executor.Executor
	runID    string
)`,
	"readme-txtool": `var st *pgstore.Store`,
	"order-tool": `type orderTool struct {
	pool *pgxpool.Pool
	st   *pgstore.Store
}`,
	"openai-failover": `var (
	tools *agent.Registry
	st    *memstore.Store
)`,
	"openaitest":  ``,
	"migrations":  `var (ctx context.Context; pool *pgxpool.Pool)`,
	"seal-config": `var (ctx context.Context; pool *pgxpool.Pool)`,
	"inspector":   `var (ctx context.Context; st *pgstore.Store; scope string; key keyhash.Sum; token int64; out []byte)`,
	"http-intro": `var (
	pgStore     *pgstore.Store
	tenantOf    func(*http.Request) string
	mux         *http.ServeMux
	createOrder http.Handler
)`,
	"http-service": `var (
	ctx           context.Context
	pool          *pgxpool.Pool
	mux           *http.ServeMux
	createOrder   func(http.ResponseWriter, *http.Request)
	authenticate  func(http.Handler) http.Handler
	auth          struct{ TenantFrom func(context.Context) string }
)`,
	"http-committx": `var (
	ctx  context.Context
	pool *pgxpool.Pool
	st   *pgstore.Store
	w    http.ResponseWriter
	h    http.Header
	body []byte
)`,
	"mcp-bridge": `var (
	ctx   context.Context
	model agent.Model
	st    store.CallStore
	runID string
	input string
)`,
	"otel-wiring": `var (
	pg    *pgstore.Store
	tools executor.Executor
)`,
}

// tolerated are type errors a fragment may have: a variable the text
// declares for the reader to use next, and the imports the wrapper offers.
// go/types says "declared and not used: x" and "\"path\" imported as x
// and not used".
var tolerated = []string{"declared and not used", "and not used"}

// Every Go snippet of README.md and docs/*.md type-checks against the
// module as it is now, a concrete store where the text has one: with its
// marker's declarations, as a file of its own when it is one (a method),
// else as the body of a function returning error.
func TestGoSnippetsCompile(t *testing.T) {
	t.Parallel()
	var snippets []block
	for _, page := range pages(t) {
		for _, b := range blocks(t, page) {
			if b.lang == "go" {
				snippets = append(snippets, b)
			}
		}
	}
	require.NotEmpty(t, snippets)
	imp := exportImporter(t)
	seen := map[string]bool{}
	for _, b := range snippets {
		name := b.marks["go"]
		require.NotEmpty(t, name, "%s: a Go block needs a <!-- go: name --> marker and an entry in preludes", b)
		prelude, ok := preludes[name]
		require.True(t, ok, "%s: no prelude for snippet %q", b, name)
		require.False(t, seen[name], "%s: snippet name %q used twice", b, name)
		seen[name] = true
		t.Run(name, func(t *testing.T) {
			src := wrap(b.text, prelude)
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, b.page, src, parser.SkipObjectResolution)
			require.NoError(t, err, "%s: does not parse:\n%s", b, src)
			var errs []string
			conf := types.Config{Importer: imp, Error: func(err error) {
				for _, ok := range tolerated {
					if strings.Contains(err.Error(), ok) {
						return
					}
				}
				errs = append(errs, err.Error())
			}}
			_, _ = conf.Check("snippet", fset, []*ast.File{f}, nil)
			require.Empty(t, errs, "%s (%s) does not compile:\n%s", b, name, numbered(src))
		})
	}
	for name := range preludes {
		require.True(t, seen[name], "prelude %q has no snippet: remove it", name)
	}
}

// wrap makes a Go file of a snippet: every offered import, the prelude,
// and the snippet itself when it is declarations, or the snippet as the
// body of a function returning error.
func wrap(snippet, prelude string) string {
	var b strings.Builder
	b.WriteString("package snippet\n\nimport (\n")
	names := make([]string, 0, len(packages))
	for n := range packages {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		b.WriteString("\t" + n + " " + strconvQuote(packages[n]) + "\n")
	}
	b.WriteString(")\n\n" + prelude + "\n\n")
	if _, err := parser.ParseFile(token.NewFileSet(), "", "package p\n"+snippet, parser.SkipObjectResolution); err == nil {
		b.WriteString(snippet)
		return b.String()
	}
	b.WriteString("func _() error {\n" + snippet + "\treturn nil\n}\n")
	return b.String()
}

func strconvQuote(s string) string { return `"` + s + `"` }

// numbered prefixes each line of src with its number, for failures.
func numbered(src string) string {
	var b strings.Builder
	sc := bufio.NewScanner(strings.NewReader(src))
	for i := 1; sc.Scan(); i++ {
		b.WriteString(itoa(i) + "\t" + sc.Text() + "\n")
	}
	return b.String()
}

// exportImporter imports the packages snippets may use from the export data
// the go command writes (go list -export: compiled once, then cached), so
// type-checking a snippet does not type-check its dependencies from source.
func exportImporter(t *testing.T) types.Importer {
	t.Helper()
	exportOnce.Do(func() {
		args := []string{"list", "-export", "-deps", "-f", "{{if .Export}}{{.ImportPath}}\t{{.Export}}{{end}}"}
		for _, p := range packages {
			args = append(args, p)
		}
		cmd := exec.Command("go", args...)
		cmd.Dir = root
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			exportErr = err.Error() + ": " + stderr.String()
			return
		}
		exports = map[string]string{}
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			path, file, ok := strings.Cut(l, "\t")
			if ok {
				exports[path] = file
			}
		}
	})
	require.Empty(t, exportErr, "go list -export")
	return importer.ForCompiler(token.NewFileSet(), "gc", func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok {
			return nil, os.ErrNotExist
		}
		return os.Open(file)
	})
}

var (
	exportOnce sync.Once
	exports    map[string]string
	exportErr  string
)
