package daemon

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// livenessWait is how long /healthz waits for the work loop to answer.
const livenessWait = 5 * time.Second

// probes is what netclass-dra's probes report (internal/endpoints serves
// them): /healthz while the daemon's work loop answers (live: the lock every
// sandbox, Unprepare and reconciliation takes is free within livenessWait; a
// wedged loop fails the liveness probe and the kubelet restarts the daemon),
// /readyz once ready is closed (registered with the kubelet and first
// connected to NRI; it stays ready across NRI reconnections), so a DaemonSet
// rollout waits for a node's daemon to serve before it moves on.
type probes struct {
	ready <-chan struct{}
	live  func(context.Context) error
}

// Live implements endpoints.Probes.
func (p probes) Live(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, livenessWait)
	defer cancel()
	if err := p.live(ctx); err != nil {
		return fmt.Errorf("the work loop does not answer: %w", err)
	}
	return nil
}

// Ready implements endpoints.Probes.
func (p probes) Ready() (string, error) {
	select {
	case <-p.ready:
		return "registered with the kubelet and connected to NRI", nil
	default:
		return "", errors.New("not registered with the kubelet and connected to NRI yet")
	}
}
