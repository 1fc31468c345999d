package chaos

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Kill plans: a worker kills itself the nth time it reaches its fail
// point, n drawn from 1..maxNth, so kills land early and late in a
// worker's life; External kills come after a random delay once the
// worker is ready.
var maxNth = map[FailPoint]int64{
	BeforeClaim:   40,
	AfterClaim:    10,
	AfterEffect:   10,
	AfterComplete: 30,
}

// stopPatience is how long a worker may take to stop after its stdin
// closed: its calls end within callTimeout.
const stopPatience = 2 * callTimeout

// supervisor runs worker processes in slots: when one dies, the next is
// started in its place. It gives each a kill plan until every fail point
// has its kills, reads their reports, and tells how each one ended.
type supervisor struct {
	bin     string       // the test binary
	base    workerConfig // everything but Incarnation and the kill plan
	targets int          // kills wanted per fail point
	extra   []string     // environment added for workers

	mu       sync.Mutex
	next     int                  // guarded by mu: next incarnation number
	live     map[int]*incarnation // guarded by mu
	stopping bool                 // guarded by mu
	planned  map[FailPoint]int    // guarded by mu: kills planned, not yet happened
	orphans  []callSpec           // guarded by mu: calls killed workers left unfinished
	got      collected            // guarded by mu
	problems []string             // guarded by mu

	wg sync.WaitGroup // one per slot
}

// collected is what the workers reported.
type collected struct {
	Calls   int // Execute calls that returned (acknowledged or failed)
	Acks    []Ack
	Kills   []Kill            // KILL lines
	Killed  map[int]FailPoint // incarnation → where it was killed
	ByPoint map[FailPoint]int // kills per fail point
	Errors  map[errorClass]int
	Samples map[errorClass][]string // a few messages per class
	Started int                     // incarnations started
}

// incarnation is one worker process.
type incarnation struct {
	id     int
	plan   FailPoint
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *tailBuffer

	// guarded by supervisor.mu
	inFlight  map[int64]callSpec // calls started and not ended
	announced *Kill              // its KILL line
	external  bool               // the supervisor SIGKILLed it
	stopped   bool               // its stdin was closed to stop it
}

func newSupervisor(bin string, base workerConfig, killsPerPoint int, env []string) *supervisor {
	return &supervisor{
		bin:     bin,
		base:    base,
		targets: killsPerPoint,
		extra:   env,
		live:    make(map[int]*incarnation),
		planned: make(map[FailPoint]int),
		got: collected{
			Killed:  make(map[int]FailPoint),
			ByPoint: make(map[FailPoint]int),
			Errors:  make(map[errorClass]int),
			Samples: make(map[errorClass][]string),
		},
	}
}

// start runs n worker slots.
func (s *supervisor) start(n int) {
	for range n {
		s.wg.Add(1)
		go s.slot()
	}
}

func (s *supervisor) slot() {
	defer s.wg.Done()
	for {
		inc, stdout, err := s.spawn()
		if err != nil {
			s.problem("start worker: %v", err)
			return
		}
		if inc == nil {
			return // stopping
		}
		s.read(inc, stdout)
		s.watch(inc)
	}
}

// spawn starts the next worker with its kill plan and returns it with its
// stdout, or returns nil when stopping.
func (s *supervisor) spawn() (*incarnation, io.Reader, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		return nil, nil, nil
	}
	cfg := s.base
	cfg.Incarnation = s.next
	s.next++
	cfg.KillAt = s.planLocked()
	cfg.Retry, s.orphans = s.orphans, nil
	if n := maxNth[cfg.KillAt]; n > 0 {
		cfg.KillNth = 1 + rand.Int64N(n)
	}
	config, err := json.Marshal(cfg)
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(s.bin, "-test.run=^$")
	cmd.Env = append(append(os.Environ(), s.extra...), EnvWorker+"="+string(config))
	inc := &incarnation{id: cfg.Incarnation, plan: cfg.KillAt, cmd: cmd, stderr: &tailBuffer{max: 8 << 10},
		inFlight: make(map[int64]callSpec)}
	cmd.Stderr = inc.stderr
	if inc.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	s.got.Started++
	s.live[inc.id] = inc
	return inc, stdout, nil
}

// planLocked picks the fail point with the fewest kills (done and planned)
// still under its target; 0 when every point has its kills.
func (s *supervisor) planLocked() FailPoint {
	var best FailPoint
	bestN := s.targets
	for _, p := range FailPoints {
		if n := s.got.ByPoint[p] + s.planned[p]; n < bestN {
			best, bestN = p, n
		}
	}
	if best != 0 {
		s.planned[best]++
	}
	return best
}

// read consumes a worker's stdout until it closes, which it does when the
// worker ends (nothing else holds the pipe). It must return before Wait,
// which closes the pipe: a line still in it would be lost.
func (s *supervisor) read(inc *incarnation, stdout io.Reader) {
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for sc.Scan() {
		m, err := parseLine(sc.Text())
		if err != nil {
			s.problem("worker %d: %v", inc.id, err)
			continue
		}
		if m.ready != nil && inc.plan == External {
			timer = time.AfterFunc(time.Duration(50+rand.IntN(1500))*time.Millisecond, func() { s.killExternally(inc) })
		}
		s.record(inc, m)
	}
}

func (s *supervisor) killExternally(inc *incarnation) {
	s.mu.Lock()
	if inc.stopped || inc.announced != nil {
		s.mu.Unlock()
		return
	}
	inc.external = true
	s.mu.Unlock()
	// After the process was reaped this returns os.ErrProcessDone.
	_ = inc.cmd.Process.Kill()
}

func (s *supervisor) record(inc *incarnation, m message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case m.start != nil:
		inc.inFlight[m.start.Seq] = m.start.Call
	case m.ack != nil:
		delete(inc.inFlight, m.seq)
		s.got.Calls++
		s.got.Acks = append(s.got.Acks, *m.ack)
	case m.err != nil:
		delete(inc.inFlight, m.seq)
		s.got.Calls++
		s.got.Errors[m.err.Class]++
		if len(s.got.Samples[m.err.Class]) < 5 {
			s.got.Samples[m.err.Class] = append(s.got.Samples[m.err.Class], m.err.Message)
		}
		if m.err.Class == classBug {
			s.problems = append(s.problems, fmt.Sprintf("worker %d: impossible error: %s", inc.id, m.err.Message))
		}
	case m.kill != nil:
		k := *m.kill
		inc.announced = &k
		s.got.Kills = append(s.got.Kills, k)
	}
}

// watch waits for a worker to end and records how it ended.
func (s *supervisor) watch(inc *incarnation) {
	err := inc.cmd.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.live, inc.id)
	if inc.plan != 0 {
		s.planned[inc.plan]--
	}
	var ws syscall.WaitStatus
	if st := inc.cmd.ProcessState; st != nil {
		ws, _ = st.Sys().(syscall.WaitStatus)
	}
	var exitErr *exec.ExitError
	switch {
	case ws.Signaled() && ws.Signal() == syscall.SIGKILL && inc.announced != nil:
		s.killedLocked(inc, inc.announced.Point)
	case ws.Signaled() && ws.Signal() == syscall.SIGKILL && inc.external:
		s.killedLocked(inc, External)
	case err == nil && inc.stopped:
		// stopped as asked
	case err == nil:
		s.problems = append(s.problems, fmt.Sprintf("worker %d exited by itself; stderr:\n%s", inc.id, inc.stderr))
	case errors.As(err, &exitErr) || ws.Signaled():
		s.problems = append(s.problems, fmt.Sprintf("worker %d ended with %v (plan %s); stderr:\n%s", inc.id, err, inc.plan, inc.stderr))
	default:
		s.problems = append(s.problems, fmt.Sprintf("worker %d: wait: %v", inc.id, err))
	}
}

func (s *supervisor) killedLocked(inc *incarnation, p FailPoint) {
	s.got.Killed[inc.id] = p
	s.got.ByPoint[p]++
	for _, c := range inc.inFlight {
		s.orphans = append(s.orphans, c)
	}
}

// progress returns a copy of the counts so far.
func (s *supervisor) progress() (calls, acks int, byPoint map[FailPoint]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	byPoint = make(map[FailPoint]int, len(s.got.ByPoint))
	for p, n := range s.got.ByPoint {
		byPoint[p] = n
	}
	return s.got.Calls, len(s.got.Acks), byPoint
}

// stop closes every worker's stdin, waits for them to stop, and returns
// what they reported and every problem seen. A worker that does not stop
// in time is killed, and that is a problem too.
func (s *supervisor) stop() (collected, []string) {
	s.mu.Lock()
	s.stopping = true
	for _, inc := range s.live {
		inc.stopped = true
		_ = inc.stdin.Close()
	}
	s.mu.Unlock()

	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	timer := time.NewTimer(stopPatience)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		s.problem("workers did not stop within %s of their stdin closing; killing them", stopPatience)
		s.abort()
		<-done
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.got, append([]string(nil), s.problems...)
}

// abort kills every worker at once and waits for the slots to end; for
// test cleanup when the run failed half-way.
func (s *supervisor) abort() {
	s.mu.Lock()
	s.stopping = true
	for _, inc := range s.live {
		inc.stopped = true
		_ = inc.cmd.Process.Kill()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *supervisor) problem(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.problems = append(s.problems, fmt.Sprintf(format, args...))
}

// summary describes what was collected, for the test log.
func (c collected) summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "workers started=%d calls=%d acks=%d\n", c.Started, c.Calls, len(c.Acks))
	b.WriteString("kills by fail point:")
	for _, p := range FailPoints {
		fmt.Fprintf(&b, " %s=%d", p, c.ByPoint[p])
	}
	b.WriteString("\nerrors by class:")
	classes := make([]string, 0, len(c.Errors))
	for cl := range c.Errors {
		classes = append(classes, string(cl))
	}
	sort.Strings(classes)
	for _, cl := range classes {
		fmt.Fprintf(&b, " %s=%d", cl, c.Errors[errorClass(cl)])
	}
	for _, cl := range classes {
		for _, m := range c.Samples[errorClass(cl)] {
			fmt.Fprintf(&b, "\n  e.g. %s: %s", cl, m)
		}
	}
	return b.String()
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
