package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/idemstore/idemstore/internal/benchpath"
)

// EnvScale, when set to anything but "" or "0", adds the scale case
// (10^7 stored records, many minutes and about 15 GB of disk), as
// IDEMSTORE_BENCH_1E6 adds the 10^6 one to store/pgstore's benchmarks.
const EnvScale = "IDEMSTORE_BENCH_1E7"

// Exit codes: 2 for bad flags, as the flag package does.
const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
)

// run is the command with its arguments and streams, for tests.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var prof profileFlags
	cfg, err := parseFlags(args, stderr, os.Getenv, &prof)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "benchpath: %v\n", err)
		return exitUsage
	}
	cfg.Out, cfg.Log = stdout, stderr
	if prof.path != "" {
		stop, err := startCPUProfile(prof.path)
		if err != nil {
			fmt.Fprintf(stderr, "benchpath: %v\n", err)
			return exitFailed
		}
		defer stop()
	}
	if err := benchpath.Run(ctx, cfg); err != nil {
		fmt.Fprintf(stderr, "benchpath: %v\n", err)
		var ce *benchpath.ConfigError
		if errors.As(err, &ce) {
			return exitUsage
		}
		return exitFailed
	}
	return exitOK
}

// parseFlags turns the command line (and the environment, through getenv)
// into a Config.
func parseFlags(args []string, stderr io.Writer, getenv func(string) string, prof *profileFlags) (*benchpath.Config, error) {
	cfg := &benchpath.Config{}
	fs := flag.NewFlagSet("benchpath", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: benchpath [flags]\n\nMeasures idemstore's public path against the raw statements, side by side.\n\n")
		fs.PrintDefaults()
	}
	fs.StringVar(&cfg.DatabaseURL, "database-url", getenv("TEST_DATABASE_URL"), "PostgreSQL to measure on (default $TEST_DATABASE_URL; empty: start a container with fsync=on)")
	fs.StringVar(&cfg.Image, "image", "", "image of the container (default $"+benchpath.EnvImage+", else "+benchpath.LocalImage+")")
	fs.DurationVar(&cfg.Duration, "duration", benchpath.DefaultDuration, "time of one side of a pair in one round")
	fs.IntVar(&cfg.Rounds, "rounds", benchpath.DefaultRounds, "rounds of each side, alternating which goes first")
	fs.DurationVar(&cfg.Warmup, "warmup", benchpath.DefaultWarmup, "unmeasured time of each side before its rounds")
	clients := fs.String("clients", joinInts(benchpath.DefaultClients), "numbers of concurrent callers, comma-separated")
	fs.IntVar(&cfg.Records, "records", benchpath.DefaultRecords, "stored calls the replays read (and the small table of scale)")
	fs.IntVar(&cfg.ResultBytes, "result-bytes", benchpath.DefaultResultBytes, "size of every stored result")
	defaultCases := slices.Clone(benchpath.DefaultCases)
	if v := getenv(EnvScale); v != "" && v != "0" {
		defaultCases = append(defaultCases, benchpath.CaseScale)
	}
	cases := fs.String("cases", strings.Join(defaultCases, ","), "cases to run, comma-separated, of: "+strings.Join(benchpath.AllCases, ", ")+" (scale is added by $"+EnvScale+"=1)")
	fs.IntVar(&cfg.CleanupRecords, "cleanup-records", benchpath.DefaultCleanupRecords, "expired records one cleanup removes")
	fs.IntVar(&cfg.ScaleRecords, "scale-records", benchpath.DefaultScaleRecords, "records of the large table of scale")
	fs.StringVar(&cfg.CitusURL, "citus-url", getenv("TEST_CITUS_URL"), "Citus coordinator of scale-out (default $TEST_CITUS_URL; empty: start a cluster with the scripts of $IDEMSTORE_CITUS_DIR, as root, or skip scale-out)")
	scaleOutClients := fs.String("scale-out-clients", joinInts(benchpath.DefaultScaleOutClients), "numbers of concurrent callers of scale-out, comma-separated")
	fs.StringVar(&prof.path, "cpuprofile", "", "write a CPU profile of the whole run (both sides of every pair) to this file, for go tool pprof")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	var err error
	if cfg.Clients, err = parseInts(*clients); err != nil {
		return nil, fmt.Errorf("-clients: %w", err)
	}
	if cfg.ScaleOutClients, err = parseInts(*scaleOutClients); err != nil {
		return nil, fmt.Errorf("-scale-out-clients: %w", err)
	}
	for c := range strings.SplitSeq(*cases, ",") {
		if c = strings.TrimSpace(c); c != "" {
			cfg.Cases = append(cfg.Cases, c)
		}
	}
	if len(cfg.Cases) == 0 {
		return nil, errors.New("-cases: no case named")
	}
	return cfg, nil
}

func parseInts(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("%q is not a number", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}
