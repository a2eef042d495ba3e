package manager

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// leaseTolerance is how long past its Lease's expiry a leader that failed to
// renew still passes /healthz (client-go's leader election then ends the
// process anyway).
const leaseTolerance = 20 * time.Second

// elector is what the probes read of the leader election.
type elector interface {
	IsLeader() bool
	GetLeader() string
	Check(maxTolerableExpiredLease time.Duration) error
}

// probes is the state /healthz and /readyz report (internal/endpoints serves them).
type probes struct {
	elect   bool // leader election is on
	synced  atomic.Bool
	mu      sync.Mutex
	elector elector
}

func (p *probes) setElector(e elector) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.elector = e
}

func (p *probes) currentElector() elector {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.elector
}

// Ready implements endpoints.Probes: whether this instance does its part: without leader election,
// once its caches synced; with it, leading with synced caches, or standing
// by while another instance holds the Lease.
func (p *probes) Ready() (string, error) {
	if !p.elect {
		if p.synced.Load() {
			return "caches synced", nil
		}
		return "", errors.New("informer caches not synced yet")
	}
	e := p.currentElector()
	switch {
	case e == nil:
		return "", errors.New("leader election not started yet")
	case e.IsLeader() && p.synced.Load():
		return "leading, caches synced", nil
	case e.IsLeader():
		return "", errors.New("leading, informer caches not synced yet")
	case e.GetLeader() != "":
		return "standing by: " + e.GetLeader() + " leads", nil
	}
	return "", errors.New("no leader observed yet")
}

// Live implements endpoints.Probes: it fails when this instance leads but
// has not renewed its Lease for longer than the Lease's duration plus
// leaseTolerance.
func (p *probes) Live(context.Context) error {
	if e := p.currentElector(); e != nil {
		return e.Check(leaseTolerance)
	}
	return nil
}
