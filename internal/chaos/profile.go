package chaos

import (
	"fmt"
	"time"
)

// Profile sizes a chaos run. The run goes on until every target is met
// (acknowledged calls, kills at every fail point, database restarts,
// connection resets) and fails if that takes longer than MaxDuration.
type Profile struct {
	Name string
	// Workers is how many worker processes run at once; a killed worker is
	// replaced at once.
	Workers int
	// Goroutines is how many goroutines of each worker call at once.
	Goroutines int
	// Acks is how many successful calls (executed or replayed) the workers
	// must acknowledge.
	Acks int
	// KillsPerPoint is how many worker processes die at each fail point
	// (each of FailPoints, External included).
	KillsPerPoint int
	// DBRestarts is how many times the database is stopped and started.
	DBRestarts int
	// RestartEvery is the time between two database restarts; the first
	// comes after one RestartEvery.
	RestartEvery time.Duration
	// DownFor is how long the database stays stopped each time.
	DownFor time.Duration
	// ConnResets is how many times every worker connection is terminated
	// by the server (pg_terminate_backend), which loses the
	// acknowledgements of statements in flight.
	ConnResets int
	// ResetEvery is the time between two connection resets.
	ResetEvery time.Duration
	// Lease is the executors' lease; short, so that takeovers happen.
	Lease time.Duration
	// ShortScopeTTL is the expiry of the short-lived scopes, which expire
	// while calls are in flight.
	ShortScopeTTL time.Duration
	// CleanEvery is the interval of the cleaner running beside the workers.
	CleanEvery time.Duration
	// MaxDuration bounds the whole run: a guard against a run that stops
	// making progress (a hang is a failure), not a timing assertion.
	MaxDuration time.Duration
}

// Profile names.
const (
	ProfileShort = "short"
	ProfileFull  = "full"
)

// ShortProfile is what a plain `go test ./...` (under -race in CI) runs:
// every kind of failure at least once, in well under two minutes on two
// cores.
func ShortProfile() Profile {
	return Profile{
		Name:          ProfileShort,
		Workers:       2,
		Goroutines:    4,
		Acks:          400,
		KillsPerPoint: 2,
		DBRestarts:    1,
		RestartEvery:  4 * time.Second,
		DownFor:       700 * time.Millisecond,
		ConnResets:    2,
		ResetEvery:    2 * time.Second,
		Lease:         500 * time.Millisecond,
		ShortScopeTTL: time.Second,
		CleanEvery:    5 * time.Millisecond,
		MaxDuration:   5 * time.Minute,
	}
}

// FullProfile is what `make chaos` runs: at least 10,000 acknowledged
// calls, 50 kills at each of the five fail points (250), 6 database
// restarts and 20 connection resets, in a few minutes on two cores.
func FullProfile() Profile {
	return Profile{
		Name:          ProfileFull,
		Workers:       3,
		Goroutines:    6,
		Acks:          10_000,
		KillsPerPoint: 50,
		DBRestarts:    6,
		RestartEvery:  10 * time.Second,
		DownFor:       1500 * time.Millisecond,
		ConnResets:    20,
		ResetEvery:    2 * time.Second,
		Lease:         500 * time.Millisecond,
		ShortScopeTTL: time.Second,
		CleanEvery:    5 * time.Millisecond,
		MaxDuration:   9 * time.Minute,
	}
}

// ProfileNamed returns the profile called name.
func ProfileNamed(name string) (Profile, error) {
	switch name {
	case ProfileShort, "":
		return ShortProfile(), nil
	case ProfileFull:
		return FullProfile(), nil
	}
	return Profile{}, fmt.Errorf("chaos: unknown profile %q (want %q or %q)", name, ProfileShort, ProfileFull)
}

// validate rejects a profile that could not run or could not finish.
func (p Profile) validate() error {
	switch {
	case p.Workers < 2:
		return fmt.Errorf("chaos: profile %s: %d workers; processes must race, so at least 2", p.Name, p.Workers)
	case p.Goroutines < 1:
		return fmt.Errorf("chaos: profile %s: %d goroutines per worker", p.Name, p.Goroutines)
	case p.Acks < 1, p.KillsPerPoint < 0, p.DBRestarts < 0, p.ConnResets < 0:
		return fmt.Errorf("chaos: profile %s: negative or zero targets", p.Name)
	case p.Lease < 50*time.Millisecond:
		return fmt.Errorf("chaos: profile %s: lease %s is too short to renew", p.Name, p.Lease)
	case p.ShortScopeTTL <= 0, p.CleanEvery <= 0, p.MaxDuration <= 0:
		return fmt.Errorf("chaos: profile %s: durations must be positive", p.Name)
	case p.DBRestarts > 0 && (p.RestartEvery <= 0 || p.DownFor < 0):
		return fmt.Errorf("chaos: profile %s: restarts need a positive RestartEvery", p.Name)
	case p.ConnResets > 0 && p.ResetEvery <= 0:
		return fmt.Errorf("chaos: profile %s: resets need a positive ResetEvery", p.Name)
	}
	return nil
}
