package chaos

import (
	"fmt"
	"time"
)

// Profile sizes a chaos run. The run goes on until every target is met
// (acknowledged calls, kills at every fail point, database restarts,
// crashes and failovers, connection resets) and fails if that takes longer
// than MaxDuration.
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
	// DBRestarts is how many times the database is stopped (a fast
	// shutdown) and started.
	DBRestarts int
	// RestartEvery is the time between two database restarts; the first
	// comes after one RestartEvery.
	RestartEvery time.Duration
	// DownFor is how long the database stays stopped each time.
	DownFor time.Duration
	// DBCrashes is how many times the database server is SIGKILLed (with
	// every backend) and started again, which runs crash recovery.
	DBCrashes int
	// CrashEvery is the time between two crashes; the first comes after
	// one CrashEvery.
	CrashEvery time.Duration
	// Failovers is how many times the primary of a pg_auto_failover
	// formation is killed or switched over (alternately); only the
	// failover profiles, which run on a formation, have them.
	Failovers int
	// ConfirmReads runs the workers' stores with pgstore's ConfirmReads,
	// as docs/operations.md says to with automatic failover: the failover
	// profiles set it.
	ConfirmReads bool
	// FailoverEvery is the time between the end of one failover (the
	// formation at rest again) and the next.
	FailoverEvery time.Duration
	// ConnResets is how many times every worker connection is terminated
	// by the server (pg_terminate_backend), which loses the
	// acknowledgements of statements in flight.
	ConnResets int
	// ResetEvery is the time between two connection resets.
	ResetEvery time.Duration
	// LoseResponses is the share of the payments API's responses it drops
	// after acting (the downstream-key window).
	LoseResponses float64
	// Lease is the executors' lease; short, so that takeovers happen.
	Lease time.Duration
	// ShortScopeTTL is the expiry of the short-lived scopes, which expire
	// while calls are in flight.
	ShortScopeTTL time.Duration
	// CleanEvery is the interval of the cleaner running beside the workers.
	CleanEvery time.Duration
	// OpenPatience is how long a new worker keeps trying to open the store
	// (0: defaultOpenPatience).
	OpenPatience time.Duration
	// MaxDuration bounds the whole run: a guard against a run that stops
	// making progress (a hang is a failure), not a timing assertion.
	MaxDuration time.Duration
}

// Profile names: -chaos.profile chooses one for TestChaos and the
// matching one for TestChaosFailover.
const (
	ProfileShort = "short"
	ProfileFull  = "full"
	ProfileLong  = "long"
)

// ShortProfile is what a plain `go test ./...` (under -race in CI) runs:
// every kind of failure at least once, in about a minute on two cores.
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
		DBCrashes:     1,
		CrashEvery:    3 * time.Second,
		ConnResets:    2,
		ResetEvery:    2 * time.Second,
		LoseResponses: 0.05,
		Lease:         500 * time.Millisecond,
		ShortScopeTTL: time.Second,
		CleanEvery:    5 * time.Millisecond,
		MaxDuration:   5 * time.Minute,
	}
}

// FullProfile is what `make chaos` runs: at least 10,000 acknowledged
// calls, 50 kills at each of the five fail points (250), 6 database
// restarts, 20 server crashes and 20 connection resets.
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
		DBCrashes:     20,
		CrashEvery:    4 * time.Second,
		ConnResets:    20,
		ResetEvery:    2 * time.Second,
		LoseResponses: 0.05,
		Lease:         500 * time.Millisecond,
		ShortScopeTTL: time.Second,
		CleanEvery:    5 * time.Millisecond,
		MaxDuration:   15 * time.Minute,
	}
}

// LongProfile is the chaos half of `make chaos-long` (not in CI): 100,000
// acknowledged calls, 200 kills at each fail point (1,000), 10 restarts, 30
// server crashes and 100 connection resets.
func LongProfile() Profile {
	p := FullProfile()
	p.Name = ProfileLong
	p.Acks = 100_000
	p.KillsPerPoint = 200
	p.DBRestarts, p.RestartEvery = 10, 60*time.Second
	p.DBCrashes, p.CrashEvery = 30, 30*time.Second
	p.ConnResets, p.ResetEvery = 100, 10*time.Second
	p.MaxDuration = 4 * time.Hour
	return p
}

// failoverBase is what the failover profiles share: the workers of the
// chaos profiles, a few kills and resets, and no restarts or crashes of
// their own (the failovers kill the primary instead). A new worker waits
// out a whole failover for its store.
func failoverBase() Profile {
	return Profile{
		Workers:       2,
		Goroutines:    4,
		ConnResets:    2,
		ResetEvery:    3 * time.Second,
		FailoverEvery: 2 * time.Second,
		LoseResponses: 0.05,
		Lease:         500 * time.Millisecond,
		ShortScopeTTL: time.Second,
		CleanEvery:    5 * time.Millisecond,
		OpenPatience:  3 * time.Minute,
		ConfirmReads:  true,
	}
}

// ShortFailoverProfile is TestChaosFailover in `go test ./...`: two
// failovers (a crash and a switchover) under load.
func ShortFailoverProfile() Profile {
	p := failoverBase()
	p.Name = ProfileShort
	p.Acks = 300
	p.KillsPerPoint = 1
	p.Failovers = 2
	p.MaxDuration = 10 * time.Minute
	return p
}

// FullFailoverProfile is `make chaos-failover`: 12 failovers, crashes and
// switchovers alternately, while 3 workers race.
func FullFailoverProfile() Profile {
	p := failoverBase()
	p.Name = ProfileFull
	p.Workers, p.Goroutines = 3, 6
	p.Acks = 3_000
	p.KillsPerPoint = 5
	p.Failovers = 12
	p.ConnResets = 10
	p.MaxDuration = 30 * time.Minute
	return p
}

// LongFailoverProfile is the failover half of `make chaos-long`.
func LongFailoverProfile() Profile {
	p := FullFailoverProfile()
	p.Name = ProfileLong
	p.Acks = 10_000
	p.KillsPerPoint = 20
	p.Failovers = 20
	p.ConnResets = 20
	p.MaxDuration = 90 * time.Minute
	return p
}

// ProfileNamed returns TestChaos's profile called name.
func ProfileNamed(name string) (Profile, error) {
	switch name {
	case ProfileShort, "":
		return ShortProfile(), nil
	case ProfileFull:
		return FullProfile(), nil
	case ProfileLong:
		return LongProfile(), nil
	}
	return Profile{}, &ProfileError{Name: name}
}

// FailoverProfileNamed returns TestChaosFailover's profile called name.
func FailoverProfileNamed(name string) (Profile, error) {
	switch name {
	case ProfileShort, "":
		return ShortFailoverProfile(), nil
	case ProfileFull:
		return FullFailoverProfile(), nil
	case ProfileLong:
		return LongFailoverProfile(), nil
	}
	return Profile{}, &ProfileError{Name: name}
}

// ProfileError names a profile that does not exist.
type ProfileError struct{ Name string }

func (e *ProfileError) Error() string {
	return fmt.Sprintf("chaos: unknown profile %q (want %q, %q or %q)", e.Name, ProfileShort, ProfileFull, ProfileLong)
}

// validate rejects a profile that could not run or could not finish.
func (p Profile) validate() error {
	switch {
	case p.Workers < 2:
		return fmt.Errorf("chaos: profile %s: %d workers; processes must race, so at least 2", p.Name, p.Workers)
	case p.Goroutines < 1:
		return fmt.Errorf("chaos: profile %s: %d goroutines per worker", p.Name, p.Goroutines)
	case p.Acks < 1, p.KillsPerPoint < 0, p.DBRestarts < 0, p.DBCrashes < 0, p.Failovers < 0, p.ConnResets < 0:
		return fmt.Errorf("chaos: profile %s: negative or zero targets", p.Name)
	case p.Lease < 50*time.Millisecond:
		return fmt.Errorf("chaos: profile %s: lease %s is too short to renew", p.Name, p.Lease)
	case p.ShortScopeTTL <= 0, p.CleanEvery <= 0, p.MaxDuration <= 0, p.OpenPatience < 0:
		return fmt.Errorf("chaos: profile %s: durations must be positive", p.Name)
	case p.LoseResponses < 0 || p.LoseResponses >= 1:
		return fmt.Errorf("chaos: profile %s: LoseResponses %v is not a share in [0, 1)", p.Name, p.LoseResponses)
	case p.DBRestarts > 0 && (p.RestartEvery <= 0 || p.DownFor < 0):
		return fmt.Errorf("chaos: profile %s: restarts need a positive RestartEvery", p.Name)
	case p.DBCrashes > 0 && p.CrashEvery <= 0:
		return fmt.Errorf("chaos: profile %s: crashes need a positive CrashEvery", p.Name)
	case p.Failovers > 0 && p.FailoverEvery <= 0:
		return fmt.Errorf("chaos: profile %s: failovers need a positive FailoverEvery", p.Name)
	case p.ConnResets > 0 && p.ResetEvery <= 0:
		return fmt.Errorf("chaos: profile %s: resets need a positive ResetEvery", p.Name)
	}
	return nil
}
