package chaos

import (
	"fmt"
	"os"
	"sync/atomic"
)

// FailPoint is where a worker process dies.
type FailPoint uint8

// The fail points, in the order a call passes them. The first four are
// reached by the worker itself, which then SIGKILLs itself; External is a
// SIGKILL sent by the supervisor at a random moment, which catches every
// goroutine of the worker wherever it is.
const (
	// BeforeClaim: the call is chosen, the store was not asked yet.
	BeforeClaim FailPoint = iota + 1
	// AfterClaim: the tool started under its claim, no side effect yet.
	AfterClaim
	// AfterEffect: the side effect happened (remote-like tool), or the
	// order row and its record were written but not committed
	// (transactional tool); the executor does not know yet.
	AfterEffect
	// AfterComplete: Execute returned success (the outcome is stored), the
	// worker has not acknowledged it.
	AfterComplete
	// External: killed by the supervisor, at no particular point.
	External
)

// FailPoints lists every fail point, for plans and reports.
var FailPoints = []FailPoint{BeforeClaim, AfterClaim, AfterEffect, AfterComplete, External}

func (p FailPoint) String() string {
	switch p {
	case BeforeClaim:
		return "before_claim"
	case AfterClaim:
		return "after_claim"
	case AfterEffect:
		return "after_effect"
	case AfterComplete:
		return "after_complete"
	case External:
		return "external"
	}
	return fmt.Sprintf("failpoint(%d)", uint8(p))
}

// parseFailPoint is the inverse of String.
func parseFailPoint(s string) (FailPoint, bool) {
	for _, p := range FailPoints {
		if p.String() == s {
			return p, true
		}
	}
	return 0, false
}

// killPlan makes a worker kill itself the nth time any of its goroutines
// reaches point. The zero plan never kills.
type killPlan struct {
	point FailPoint
	nth   int64
	hits  atomic.Int64
	// announce writes the KILL line; it must return only once the line is
	// in the pipe, so the supervisor learns which call died where.
	announce func(p FailPoint, scope, key string, token int64)
}

// hit is called by every goroutine at every fail point. When the plan says
// so it announces the kill and SIGKILLs the process: no deferred function,
// no buffered write and no connection close runs, exactly as in a crash.
func (k *killPlan) hit(p FailPoint, scope, key string, token int64) {
	if k == nil || k.point != p || p == External {
		return
	}
	if k.hits.Add(1) != k.nth {
		return
	}
	k.announce(p, scope, key, token)
	self, err := os.FindProcess(os.Getpid())
	if err == nil {
		err = self.Kill()
	}
	if err != nil {
		// Dying some other way would not be the crash the suite is about.
		panic(fmt.Sprintf("chaos: cannot kill myself at %s: %v", p, err))
	}
	select {} // SIGKILL is asynchronous: never go on past the fail point
}
