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
		up, down, err := sections(string(data))
		if err != nil {
			return nil, fmt.Errorf("migration %s: %w", name, err)
		}
		out = append(out, source{version: v, name: path.Base(name), up: up, down: down})
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

// sections splits a goose SQL file into its Up and Down SQL. Each section
// runs as one multi-statement string, in one transaction, so
// StatementBegin/End (which only guide goose's statement splitter) are
// dropped.
func sections(text string) (up, down string, err error) {
	var (
		b       [2]strings.Builder // 0: up, 1: down
		current = -1
	)
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, len(text)+1)
	for sc.Scan() {
		line := sc.Text()
		if ann, ok := annotation(line); ok {
			switch ann {
			case "up":
				current = 0
			case "down":
				current = 1
			case "statementbegin", "statementend":
			default:
				return "", "", fmt.Errorf("annotation %q is not supported: every migration runs as one statement string inside a transaction", strings.TrimSpace(line))
			}
			continue
		}
		if current >= 0 {
			b[current].WriteString(line)
			b[current].WriteByte('\n')
		}
	}
	if err := sc.Err(); err != nil {
		return "", "", err
	}
	up, down = strings.TrimSpace(b[0].String()), strings.TrimSpace(b[1].String())
	if up == "" {
		return "", "", errors.New("no -- +goose Up section")
	}
	return up + "\n", down + "\n", nil
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
