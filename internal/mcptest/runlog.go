package mcptest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"
)

// runLogFile appends one line per run of a side-effecting tool: the tool's
// name, a space, and its arguments.
type runLogFile struct {
	path string

	mu     sync.Mutex     // serialises this process's runs
	counts map[string]int // runs per tool, when path is empty; guarded by mu
}

// record logs a run of tool and returns its number among tool's runs (1
// for the first), counted over every process that wrote the log. Processes
// that share a log must not run tools at the same time: the count and the
// append are two steps.
func (l *runLogFile) record(tool string, args []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.path == "" {
		if l.counts == nil {
			l.counts = make(map[string]int)
		}
		l.counts[tool]++
		return l.counts[tool], nil
	}
	runs, err := Runs(l.path)
	if err != nil {
		return 0, err
	}
	f, err := os.OpenFile(l.path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return 0, fmt.Errorf("mcptest: run log: %w", err)
	}
	line := tool + " " + string(bytes.ReplaceAll(args, []byte("\n"), []byte(" "))) + "\n"
	if _, err := f.WriteString(line); err != nil {
		_ = f.Close()
		return 0, fmt.Errorf("mcptest: run log: %w", err)
	}
	if err := f.Close(); err != nil {
		return 0, fmt.Errorf("mcptest: run log: %w", err)
	}
	return runs[tool] + 1, nil
}

// Runs reads the run log at path and returns how many times each tool ran.
// A log that does not exist yet means no runs.
func Runs(path string) (map[string]int, error) {
	runs := make(map[string]int)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return runs, nil
	}
	if err != nil {
		return nil, fmt.Errorf("mcptest: run log: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		tool, _, _ := strings.Cut(sc.Text(), " ")
		runs[tool]++
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("mcptest: run log: %w", err)
	}
	return runs, nil
}
