package executor

import "sync/atomic"

// newnessMax bounds the score of newness: after any run of calls that all
// went one way, at most newnessMax+1 of the other kind turn the hint
// around.
const newnessMax = 8

// newness decides whether a call new to this process is claimed as likely
// new to the store (store.WriteOptions.LikelyNew). Usually it is, and the
// hint saves its miss a round trip. But after a restart, or when a model's
// retry lands on another replica, the calls this process has not seen are
// stored already, and there the hinted claim costs a replay more than a
// plain read (on pgstore a second statement: the insert finds the key
// taken, having drawn a token and locked the scope row, then the read
// decides). So the executor keeps a
// score of what the first claims of its unseen calls found: +1 for a claim
// granted on no record, -1 for a record (stored, claimed elsewhere, or one
// taken over, which the hinted statement reads and then claims anyway),
// within ±newnessMax, and hints while the score is not negative. A wrong
// guess costs one call a round trip (an unhinted miss, or a hinted
// replay), never a different decision: the hint changes none
// (storetest's ClaimHintDecidesTheSame).
type newness struct {
	score atomic.Int32
}

// likely reports whether the next unseen call should be hinted as new.
func (n *newness) likely() bool { return n.score.Load() >= 0 }

// saw records what the first claim of an unseen call found. It writes the
// shared word only when the score moves: a saturated score is read, not
// written, by every call.
func (n *newness) saw(granted bool) {
	for {
		old := n.score.Load()
		next := old - 1
		if granted {
			next = old + 1
		}
		if next > newnessMax || next < -newnessMax || n.score.CompareAndSwap(old, next) {
			return
		}
	}
}
