package main

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// profileFlags are the flags that profile the run rather than configure it.
type profileFlags struct {
	path string // -cpuprofile
}

// startCPUProfile profiles the process's CPU into the file at path until the
// returned function is called: where a side's time goes, seen with go tool
// pprof (focus on idemstore's packages to leave the raw side out).
func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("-cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("-cpuprofile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
