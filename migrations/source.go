package migrations

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/pressly/goose/v3"
)

// source is one migration file of FS, parsed once and run the same way by
// every route: the pool (through goose), the caller's transaction, and the
// script of SQL.
type source struct {
	version  int64
	name     string // file name, e.g. "00001_create_idemstore.sql"
	up, down string // the SQL of each section, annotations removed
	// upStmts and downStmts are the sections cut into statements the way
	// goose cuts them (a semicolon ends a line, except between
	// StatementBegin and StatementEnd). They run one at a time: Citus
	// refuses DDL on distributed tables inside a multi-statement string.
	upStmts, downStmts []string
}

// parseSources reads every .sql file of fsys, in version order. The files
// are goose SQL migrations; this package understands the annotations it
// needs (Up, Down, StatementBegin, StatementEnd) and refuses the others, so
// a file that asks for something no route here does (NO TRANSACTION, ENVSUB)
// fails in the tests instead of running differently on one route.
func parseSources(fsys fs.FS) ([]source, error) {
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return nil, err
	}
	out := make([]source, 0, len(names))
	for _, name := range names {
		v, err := goose.NumericComponent(path.Base(name))
		if err != nil {
			return nil, fmt.Errorf("migration %s: %w", name, err)
		}
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("migration %s: %w", name, err)
		}
		sec, err := sections(string(data))
		if err != nil {
			return nil, fmt.Errorf("migration %s: %w", name, err)
		}
		out = append(out, source{version: v, name: path.Base(name), up: sec.text[0], down: sec.text[1],
			upStmts: sec.stmts[0], downStmts: sec.stmts[1]})
	}
	slices.SortFunc(out, func(a, b source) int { return cmp.Compare(a.version, b.version) })
	for i := 1; i < len(out); i++ {
		if out[i].version == out[i-1].version {
			return nil, fmt.Errorf("migrations %s and %s have the same version %d", out[i-1].name, out[i].name, out[i].version)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no migrations (*.sql) found")
	}
	return out, nil
}

// parsed is a goose SQL file's two sections (0: up, 1: down), as text and
// as statements.
type parsed struct {
	text  [2]string
	stmts [2][]string
}

// sections splits a goose SQL file into its Up and Down SQL, and each into
// statements: a line ending in a semicolon ends a statement, except between
// StatementBegin and StatementEnd (a function body), which is one statement.
func sections(text string) (parsed, error) {
	var (
		p       parsed
		b       [2]strings.Builder // whole sections
		stmt    strings.Builder    // the statement being read
		current = -1
		block   = false
	)
	flush := func() {
		if t := strings.TrimSpace(stmt.String()); t != "" && current >= 0 {
			p.stmts[current] = append(p.stmts[current], t)
		}
		stmt.Reset()
	}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, len(text)+1)
	for sc.Scan() {
		line := sc.Text()
		if ann, ok := annotation(line); ok {
			switch ann {
			case "up", "down":
				flush()
				current = map[string]int{"up": 0, "down": 1}[ann]
			case "statementbegin":
				flush()
				block = true
			case "statementend":
				block = false
				flush()
			default:
				return parsed{}, fmt.Errorf("annotation %q is not supported: every migration runs inside a transaction", strings.TrimSpace(line))
			}
			continue
		}
		if current < 0 {
			continue
		}
		b[current].WriteString(line)
		b[current].WriteByte('\n')
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "--") && stmt.Len() == 0 {
			continue // a comment between statements
		}
		stmt.WriteString(line)
		stmt.WriteByte('\n')
		if !block && strings.HasSuffix(trimmed, ";") {
			flush()
		}
	}
	if err := sc.Err(); err != nil {
		return parsed{}, err
	}
	flush()
	if block {
		return parsed{}, errors.New("StatementBegin without StatementEnd")
	}
	up, down := strings.TrimSpace(b[0].String()), strings.TrimSpace(b[1].String())
	if up == "" {
		return parsed{}, errors.New("no -- +goose Up section")
	}
	p.text = [2]string{up + "\n", down + "\n"}
	return p, nil
}

// annotation returns the lower-cased annotation of a "-- +goose X" line,
// spaces removed ("NO TRANSACTION" becomes "notransaction").
func annotation(line string) (string, bool) {
	s, ok := strings.CutPrefix(strings.TrimSpace(line), "--")
	if !ok {
		return "", false
	}
	rest, ok := strings.CutPrefix(strings.TrimSpace(s), "+goose ")
	if !ok {
		return "", false
	}
	return strings.ToLower(strings.Join(strings.Fields(rest), "")), true
}

// lookup returns the source of version v.
func lookup(sources []source, v int64) (source, bool) {
	i, ok := slices.BinarySearchFunc(sources, v, func(s source, v int64) int { return cmp.Compare(s.version, v) })
	if !ok {
		return source{}, false
	}
	return sources[i], true
}
