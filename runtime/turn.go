package runtime

import (
	"context"
	"errors"
	"time"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/executor"
	"github.com/idemstore/idemstore/keyhash"
)

// decision is what the runtime knows about a call before reporting it.
type decision struct {
	refused error              // unknown or not-allowed tool, or a bad call found by the probe
	hit     bool               // the probe found a stored outcome
	stored  executor.Result    // the stored outcome, when hit
	prep    *executor.Prepared // a call to run, prepared by the probe (nil without a store)
}

// runCalls handles the tool calls of one turn: refuse what may not run,
// probe the rest together, then report and run them one by one, in order.
func (s *run) runCalls(ctx context.Context, attempt, turn int, calls []executor.Call) error {
	decisions := s.decide(ctx, calls)
	// A turn abandoned part way (cancellation) gives up the claims the probe
	// took for calls that will not run, so that a retry runs them at once.
	defer func() {
		for _, d := range decisions {
			if d.prep != nil {
				d.prep.Release(ctx, "the agent run was abandoned before this call ran")
			}
		}
	}()
	if err := ctx.Err(); err != nil {
		return err
	}
	for i, call := range calls {
		if err := ctx.Err(); err != nil {
			return err
		}
		entry := CallEntry{GateAttempt: attempt, Turn: turn, Call: call}
		d := decisions[i]
		switch {
		case d.refused != nil:
			s.steps.refused(call.Tool, d.refused)
			entry.Status, entry.Err = StatusRefused, d.refused
			entry.Output = errorOutput(d.refused)
		case d.hit:
			entry.Output = d.stored.Output
			entry.Status = s.reportReplay(call.Tool, d.stored)
		default:
			entry = s.execute(ctx, entry, d.prep)
		}
		s.tr.Calls = append(s.tr.Calls, entry)
		s.messages = append(s.messages, Message{
			Role:           RoleTool,
			Content:        string(entry.Output),
			ProviderCallID: call.ProviderCallID,
			ToolName:       call.Tool,
			IsError:        entry.Status == StatusFailed || entry.Status == StatusReplayedFailure || entry.Status == StatusRefused,
		})
		if entry.Err != nil && ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return nil
}

// decide refuses unknown and not-allowed tools, then probes every other call
// of the turn in one step (executor.Scoped.Prepare: one store round trip,
// which also claims the misses). Nothing is reported here: the probe comes
// before anything reports a real call.
func (s *run) decide(ctx context.Context, calls []executor.Call) []decision {
	decisions := make([]decision, len(calls))
	var probeAt []int
	var probeCalls []executor.Call
	for i, call := range calls {
		if err := s.cfg.Tools.Check(call.Tool); err != nil {
			decisions[i].refused = err
			continue
		}
		probeAt = append(probeAt, i)
		probeCalls = append(probeCalls, call)
	}
	if s.exec == nil {
		// Without a store nothing checks the arguments on the way to the
		// tool: refuse here what an executor would refuse (invalid JSON,
		// duplicate keys, not an object, too large or deep), so that a bad
		// call is refused the same way with a store and without.
		for _, i := range probeAt {
			if _, err := keyhash.Canonicalize(calls[i].Args, contract.Limits{}); err != nil {
				decisions[i].refused = err
			}
		}
		return decisions
	}
	if len(probeCalls) == 0 {
		return decisions
	}
	preps, err := s.exec.Prepare(ctx, probeCalls)
	if err != nil && ctx.Err() == nil {
		s.cfg.Logger.WarnContext(ctx, "runtime: probe failed, running every call of the turn as a miss", "calls", len(probeCalls), "error", err)
	}
	for j := range preps {
		p := &preps[j]
		d := &decisions[probeAt[j]]
		switch {
		case p.Err != nil:
			d.refused = p.Err
		case p.Replayed:
			d.hit, d.stored = true, p.Result
		default:
			d.prep = p
		}
	}
	return decisions
}

// reportReplay reports a replayed outcome with its one progress step and
// returns its status. No event, no observer, no invocation: a replay is not
// a call.
func (s *run) reportReplay(tool string, res executor.Result) Status {
	if res.Failed {
		s.steps.reusedFailure(tool, res.Output)
		return StatusReplayedFailure
	}
	s.steps.reused(tool, res.Output)
	return StatusReplayed
}

// execute runs a probe miss as a real call: step, invocation counter,
// started event and observers, the executor (prep, or the registry itself
// without a store), completion event and observers.
func (s *run) execute(ctx context.Context, entry CallEntry, prep *executor.Prepared) CallEntry {
	call := entry.Call
	s.tr.Invocations++
	s.steps.calling(call.Tool, call.Args)
	started := Event{Kind: EventToolStarted, GateAttempt: entry.GateAttempt, Turn: entry.Turn, Call: call}
	s.emit(ctx, started)
	for _, o := range s.cfg.Observers {
		o.OnToolStarted(ctx, started)
	}

	begin := time.Now()
	var (
		res executor.Result
		err error
	)
	if prep != nil {
		res, err = prep.Run(ctx)
	} else {
		res, err = s.cfg.Tools.Execute(ctx, call)
		// Without a store nothing is replayed: the tool ran, whatever its
		// Result says (the executor clears it the same way).
		res.Replayed = false
	}
	took := time.Since(begin)

	var notStored *executor.OutcomeNotStoredError
	switch {
	case errors.As(err, &notStored):
		// The tool ran, but its outcome could not be stored. The model gets
		// what the tool produced (the side effect may well have happened and
		// must not look like a failure to retry); Err says it is not stored.
		s.cfg.Logger.WarnContext(ctx, "runtime: a tool ran but its outcome was not stored", "tool", call.Tool, "error", err)
		entry.Err, entry.Output, entry.Status = err, notStored.Result.Output, StatusSucceeded
		if notStored.Result.Failed {
			entry.Status = StatusFailed
			s.steps.failed(call.Tool, entry.Output)
		}
	case err != nil:
		entry.Status, entry.Err, entry.Output = StatusFailed, err, errorOutput(err)
		s.steps.failed(call.Tool, entry.Output)
	case res.Replayed:
		// Another caller stored the outcome between the probe and Execute.
		// The call was already reported as real; report the replay too.
		entry.Output, entry.ReplayedLate = res.Output, true
		entry.Status = s.reportReplay(call.Tool, res)
	case res.Failed:
		entry.Status, entry.Output = StatusFailed, res.Output
		s.steps.failed(call.Tool, entry.Output)
	default:
		entry.Status, entry.Output = StatusSucceeded, res.Output
	}

	// The completion belongs to the call that started, even if ctx is done
	// now: observers and the bus must see every started call end.
	done := context.WithoutCancel(ctx)
	completed := started
	completed.Kind, completed.Status, completed.Output, completed.Err, completed.Duration = EventToolCompleted, entry.Status, entry.Output, entry.Err, took
	s.emit(done, completed)
	for _, o := range s.cfg.Observers {
		o.OnToolCompleted(done, completed)
	}
	return entry
}

// errorOutput is what the model is handed for a call that failed with an
// error or was refused.
func errorOutput(err error) []byte {
	return []byte("error: " + err.Error())
}
