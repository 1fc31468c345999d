package memstore

import (
	"bytes"
	"context"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/seal"
)

// shardCount is the number of independently locked parts of the store.
// Scopes are spread over shards by hash, so callers in different runs rarely
// share a lock, and readers of one run share only a read lock.
const shardCount = 32

// Store is the in-memory store.Store. It is safe for concurrent use by many
// goroutines. Create it with New: a Store not made by New (nil, or a zero
// value) is refused with a *contract.InputError naming the store.
type Store struct {
	clock      Clock
	base       time.Time // tick 0 of the replays' clock (ticks.go)
	defaultTTL time.Duration
	limits     store.Limits // with defaults applied
	maxRecords int64
	maxBytes   int64
	share      bool
	sealer     *seal.Sealer // nil: results held in clear (also for a Sealer without a current key)

	seed   maphash.Seed
	shards [shardCount]shard
	scopes sync.Map // scope name -> *scope: every shard's, for replays without a lock (done.go)

	localReplays stripedCounter // replays answered by ReplayLocal

	records atomic.Int64 // records held in all shards, including reservations
	bytes   atomic.Int64 // accounted bytes held, including reservations
	tokens  atomic.Int64 // the last fencing token granted; tokens only grow

	// evictMu lets one writer evict at a time, so that two writers short of
	// room do not both empty the store for one record.
	evictMu sync.Mutex
}

var (
	_ store.Store         = (*Store)(nil)
	_ store.LocalReplayer = (*Store)(nil)
)

// shard holds the scopes whose names hash to it.
type shard struct {
	mu     sync.RWMutex
	scopes map[string]*scope // guarded by mu
	stats  counters
	_      [64]byte // keeps neighbouring shards' locks off one cache line
}

// scope is one run's records. All its records share expiresAt.
type scope struct {
	name      string
	expiresAt time.Time              // guarded by the shard's mu
	records   map[keyhash.Sum]*entry // guarded by the shard's mu
	pending   int                    // records with StatusPending; guarded by the shard's mu
	// done holds the completed records as replays read them without the
	// lock (done.go).
	done doneIndex
	// expiry mirrors expiresAt in ticks (ticks.go) for replays, which read
	// it without the lock (done.go); set with setExpiry.
	expiry atomic.Int64
	// lastUsed is the scope's latest use in ticks, for least-recently-used
	// eviction. It is an atomic so that readers holding only the read lock
	// can refresh it.
	lastUsed atomic.Int64
}

// entry is one record as stored. Its rec.Outcome.Result is never modified
// after it is stored, so it may be read (and, unless CopyResults is set, handed out)
// without the lock. rec.ExpiresAt is not kept here: the scope's is the truth.
type entry struct {
	rec  store.Record
	cost int64 // accounted bytes
	// changed is closed when a pending record changes or goes away, waking
	// every Wait on it; a fresh channel replaces it when the record stays
	// pending (takeover, renewal). nil once completed. Guarded by the shard's
	// mu.
	changed chan struct{}
}

// New returns an empty store configured by cfg (nil means the defaults). A
// nonsensical cfg gives a *contract.ConfigError.
func New(cfg *Config) (*Store, error) {
	c := cfg.withDefaults()
	if err := c.validate(cfg); err != nil {
		return nil, err
	}
	s := &Store{
		clock:      c.Clock,
		base:       baseOf(c.Clock),
		defaultTTL: c.DefaultScopeTTL,
		limits:     c.Limits.WithDefaults(),
		maxRecords: int64(c.MaxRecords),
		maxBytes:   c.MaxBytes,
		share:      !c.CopyResults,
		seed:       maphash.MakeSeed(),
	}
	if c.Sealer.Current() != 0 {
		s.sealer = c.Sealer
	}
	for i := range s.shards {
		s.shards[i].scopes = make(map[string]*scope)
	}
	return s, nil
}

func (s *Store) shardFor(scopeName string) *shard {
	return &s.shards[maphash.String(s.seed, scopeName)%shardCount]
}

// touchGranularity is how stale a scope's lastUsed may get before a reader
// refreshes it: readers of a busy scope then rarely write the shared word.
const touchGranularity = int64(time.Millisecond)

// touch records a use of sc at now, in ticks.
func (sc *scope) touch(now int64) {
	if now-sc.lastUsed.Load() >= touchGranularity {
		sc.lastUsed.Store(now)
	}
}

func (sc *scope) live(now time.Time) bool { return sc.expiresAt.After(now) }

func (e *entry) leaseLive(now time.Time) bool {
	return e.rec.Status == store.StatusPending && e.rec.LeaseUntil.After(now)
}

// out returns the record as handed to a caller: the scope's expiry filled in
// and, unless results are shared, the caller's own copy of the result. A
// completed record of a store that seals still holds its sealed result:
// the caller reveals it once the lock is released.
func (s *Store) out(e *entry, sc *scope) store.Record {
	rec := e.rec
	rec.ExpiresAt = sc.expiresAt
	if !s.share && s.sealer == nil {
		rec.Outcome.Result = cloneResult(rec.Outcome.Result)
	}
	return rec
}

// cloneResult returns the caller's own copy of a stored result (nil stays
// nil: pending records have none).
func cloneResult(r []byte) []byte {
	if r == nil {
		return nil
	}
	return bytes.Clone(r)
}

// recordCost is the accounted size of a record (see Config.MaxBytes).
func recordCost(scopeName, tool string, resultLen int) int64 {
	return int64(RecordOverheadBytes + len(scopeName) + len(tool) + resultLen)
}

// storedResult copies a caller's result into memory the store owns, with its
// capacity cut to its length so that a shared slice cannot be appended into.
func storedResult(r []byte) []byte {
	if r == nil {
		return []byte{}
	}
	c := bytes.Clone(r)
	return c[:len(c):len(c)]
}

// removeEntry drops e from sc and gives back its accounting; the caller holds
// the shard's write lock.
func (s *Store) removeEntry(sc *scope, key keyhash.Sum, e *entry) {
	unpublish(sc, e)
	delete(sc.records, key)
	if e.rec.Status == store.StatusPending {
		sc.pending--
	}
	if e.changed != nil {
		close(e.changed)
		e.changed = nil
	}
	s.records.Add(-1)
	s.bytes.Add(-e.cost)
}

// dropDead removes the records of the expired scope sc that nobody may see
// again (all but pending records with a live lease), at most max of them (max
// < 0: no bound), and removes sc from sh when it is left empty. It returns how
// many records it removed. The caller holds sh's write lock.
func (s *Store) dropDead(sh *shard, sc *scope, now time.Time, max int) int {
	n := 0
	for key, e := range sc.records {
		if max >= 0 && n >= max {
			break
		}
		if e.leaseLive(now) {
			continue
		}
		s.removeEntry(sc, key, e)
		n++
	}
	if len(sc.records) == 0 {
		s.dropScope(sh, sc)
	}
	return n
}

// scopeForWrite returns the live scope named name, starting it (new, or
// anew after it expired) with expiry now+ttl. Starting an expired scope drops
// its dead records; a pending record whose lease is still live survives into
// the new scope, so its holder can still complete and nobody else runs the
// call meanwhile. The caller holds sh's write lock and must call
// dropIfEmpty if it ends up writing nothing.
func (s *Store) scopeForWrite(sh *shard, name string, now time.Time, ttl time.Duration) *scope {
	sc := sh.scopes[name]
	if sc != nil && sc.live(now) {
		sc.touch(s.ticks(now))
		return sc
	}
	if sc != nil {
		s.dropDead(sh, sc, now, -1)
	}
	if sc = sh.scopes[name]; sc == nil {
		sc = &scope{name: name, records: make(map[keyhash.Sum]*entry)}
		s.addScope(sh, sc)
	}
	s.setExpiry(sc, now.Add(ttl))
	sc.lastUsed.Store(s.ticks(now))
	return sc
}

func (s *Store) dropIfEmpty(sh *shard, sc *scope) {
	if len(sc.records) == 0 {
		s.dropScope(sh, sc)
	}
}

// begin is what every method that takes a context checks first: a store
// made by New (a nil *Store, or a zero Store written as a literal, has no
// clock and no shards' maps: its first write panicked), then ctx (ctxDone).
func (s *Store) begin(ctx context.Context, op string) error {
	if s == nil || s.clock == nil {
		return &contract.InputError{Field: "store", Problem: "a memstore.Store not made by memstore.New"}
	}
	return ctxDone(ctx, op)
}

// beginOutcome is begin for the writes that settle a claim (Complete,
// Release): a caller that gave up must not lose a finished result or leave
// its claim to expire, so a done ctx is not refused, as the PostgreSQL
// store does not refuse it (nothing here waits on ctx anyway).
func (s *Store) beginOutcome(ctx context.Context) error {
	if s == nil || s.clock == nil {
		return &contract.InputError{Field: "store", Problem: "a memstore.Store not made by memstore.New"}
	}
	return contract.CheckContext(ctx)
}

// ctxDone refuses a nil ctx and returns ctx's error, naming op, if it is
// done (contract.Interrupted, as the PostgreSQL store does). It checks Done
// first: for a context shared by many goroutines that is one atomic load,
// where Err would take the context's mutex on every call.
func ctxDone(ctx context.Context, op string) error {
	if ctx == nil {
		return contract.CheckContext(ctx)
	}
	select {
	case <-ctx.Done():
		return contract.Interrupted(op, ctx.Err())
	default:
		return nil
	}
}

// Limits returns the limits the store enforces, with defaults applied. The
// executor checks every call against them before the tool runs. A Store
// not made by New (see begin), which every other method refuses or answers
// as empty, has the defaults.
func (s *Store) Limits() store.Limits {
	if s == nil || s.clock == nil {
		return store.Limits{}.WithDefaults()
	}
	return s.limits
}
