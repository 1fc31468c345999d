package pgtest

import (
	"context"
	"fmt"
	"testing"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
)

// Crash kills the server without a shutdown: SIGKILL to the container, whose
// PID 1 is the postmaster, so the postmaster and every backend die at once
// as in a power cut of the database host, minus the loss of the page cache.
// No shutdown checkpoint is written: the next Start runs crash recovery,
// replaying the WAL written since the last checkpoint, which is what the
// tests of committed-means-durable need (Stop is a clean, fast shutdown).
// Open connections fail at once; new ones are refused until Start.
func (c *Container) Crash(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := c.kill(ctx); err != nil {
		t.Fatalf("pgtest: crash container: %v", err)
	}
}

// CrashRestart is Crash then Start: it returns the URL once the server has
// recovered and answers queries. On a local engine the URL is the one
// before the crash (see Start), so pools made earlier reconnect by
// themselves.
func (c *Container) CrashRestart(t testing.TB) string {
	t.Helper()
	c.Crash(t)
	return c.Start(t)
}

// kill sends SIGKILL to the container and returns once Docker reports it
// stopped, so a Start that follows never finds it still running.
func (c *Container) kill(ctx context.Context) error {
	p, err := testcontainers.NewDockerProvider()
	if err != nil {
		return fmt.Errorf("docker: %w", err)
	}
	defer p.Close()
	cli := p.Client()
	id := c.ctr.GetContainerID()
	// Register the wait before the kill, so the exit cannot be missed.
	wait := cli.ContainerWait(ctx, id, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
	if _, err := cli.ContainerKill(ctx, id, client.ContainerKillOptions{Signal: "KILL"}); err != nil {
		return fmt.Errorf("kill: %w", err)
	}
	select {
	case res := <-wait.Result:
		if res.Error != nil && res.Error.Message != "" {
			return fmt.Errorf("wait for the killed container: %s", res.Error.Message)
		}
		return nil
	case err := <-wait.Error:
		return fmt.Errorf("wait for the killed container: %w", err)
	}
}
