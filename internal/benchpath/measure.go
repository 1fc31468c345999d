package benchpath

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// An op is one operation of one side of a pair, run by caller c (from 0)
// as its n-th operation of the measurement (from 0). It must check what it
// got (a replay replayed, a row inserted), so that a side that silently
// does less work cannot look fast.
type op func(ctx context.Context, c, n int) error

// sample is what one or more measurements of one side gave.
type sample struct {
	ops     int64
	elapsed time.Duration   // wall time, from the start of the callers to the end of the last
	lat     []time.Duration // latencies of the sampled operations
	// cpu is the machine's CPU time over the measurement (client,
	// database, network, everything): what an operation costs on a
	// machine whose CPUs are the bottleneck, and a figure a drift in the
	// machine's speed moves less than throughput. Not ok off Linux.
	cpu cpuTimes
}

// add accumulates another measurement of the same side.
func (s *sample) add(o sample) {
	first := s.ops == 0
	s.ops += o.ops
	s.elapsed += o.elapsed
	s.lat = append(s.lat, o.lat...)
	if first {
		s.cpu = o.cpu
	} else {
		s.cpu = s.cpu.plus(o.cpu)
	}
}

// cpuPerOp is the machine's busy CPU time per operation, and the client's
// part of it, 0 when unknown.
func (s sample) cpuPerOp() (all, client time.Duration) {
	if !s.cpu.ok || s.ops == 0 {
		return 0, 0
	}
	return s.cpu.busy / time.Duration(s.ops), s.cpu.self / time.Duration(s.ops)
}

// rate is operations per second.
func (s sample) rate() float64 {
	if s.elapsed <= 0 {
		return 0
	}
	return float64(s.ops) / s.elapsed.Seconds()
}

// percentile returns the p-th percentile (0 < p < 100) of the sampled
// latencies, 0 without samples.
func (s sample) percentile(p float64) time.Duration {
	return percentile(s.lat, p)
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	sorted := slices.Clone(d)
	slices.Sort(sorted)
	i := int(float64(len(sorted)) * p / 100)
	return sorted[min(i, len(sorted)-1)]
}

// measure runs o from clients goroutines at once for d, and returns how many
// operations completed and how long the run took. Every stride-th
// operation of a caller is timed on its own (stride 1: all of them); a
// stride above 1 is for operations of a microsecond or less, which reading
// the clock twice would slow down noticeably. The first error of any
// caller stops all of them and is returned.
func measure(ctx context.Context, clients int, d time.Duration, stride int, o op) (sample, error) {
	until := make(chan struct{})
	timer := time.AfterFunc(d, func() { close(until) })
	defer timer.Stop()
	return measureUntil(ctx, clients, until, stride, o)
}

// measureUntil is measure until the channel until is closed.
func measureUntil(ctx context.Context, clients int, until <-chan struct{}, stride int, o op) (sample, error) {
	if stride < 1 {
		stride = 1
	}
	var (
		stop  atomic.Bool
		start = make(chan struct{})
		done  = make(chan struct{})
		wg    sync.WaitGroup
		ops   = make([]int64, clients)
		lats  = make([][]time.Duration, clients)
		errs  = make([]error, clients)
	)
	for c := range clients {
		wg.Go(func() {
			<-start
			// One operation at least, however late the caller starts: on a
			// loaded machine the window can close before a goroutine runs,
			// and a sample of none says nothing (the run fails on it).
			for n := 0; n == 0 || !stop.Load(); n++ {
				var err error
				if n%stride == 0 {
					t0 := time.Now()
					err = o(ctx, c, n)
					lats[c] = append(lats[c], time.Since(t0))
				} else {
					err = o(ctx, c, n)
				}
				if err != nil {
					errs[c] = err
					stop.Store(true)
					return
				}
				ops[c]++
			}
		})
	}
	// The callers check a flag, not a channel, between operations: a
	// select per operation would cost the in-memory pair noticeably.
	var watcher sync.WaitGroup
	watcher.Go(func() {
		select {
		case <-until:
		case <-ctx.Done():
		case <-done:
		}
		stop.Store(true)
	})
	cpu0 := readCPU()
	t0 := time.Now()
	close(start)
	wg.Wait()
	s := sample{elapsed: time.Since(t0), cpu: cpu0.since()}
	close(done)
	watcher.Wait()
	for c := range clients {
		if errs[c] != nil {
			return s, fmt.Errorf("caller %d: %w", c, errs[c])
		}
		s.ops += ops[c]
		s.lat = append(s.lat, lats[c]...)
	}
	if err := ctx.Err(); err != nil {
		return s, err
	}
	if s.ops == 0 {
		return s, fmt.Errorf("no operation completed")
	}
	return s, nil
}
