package nri

import (
	"context"
	"sync"
	"time"
)

// inflight counts the sandboxes being attached, so that background work
// can yield to them (WaitIdle).
type inflight struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed while n == 0
}

func newInflight() *inflight {
	idle := make(chan struct{})
	close(idle)
	return &inflight{idle: idle}
}

// start counts a sandbox in until the returned func is called.
func (f *inflight) start() func() {
	f.mu.Lock()
	if f.n == 0 {
		f.idle = make(chan struct{})
	}
	f.n++
	f.mu.Unlock()
	return func() {
		f.mu.Lock()
		if f.n--; f.n == 0 {
			close(f.idle)
		}
		f.mu.Unlock()
	}
}

// WaitIdle waits until no sandbox is being attached, at most max (or until
// ctx ends): background work (the QoS and policy agent) calls it before a
// sync, so that a burst of pods does not share the CPU, the rtnl lock and
// nftables with it; bounded, so that the work is delayed, never starved.
func (p *Plugin) WaitIdle(ctx context.Context, max time.Duration) {
	p.inflight.mu.Lock()
	idle := p.inflight.idle
	p.inflight.mu.Unlock()
	t := time.NewTimer(max)
	defer t.Stop()
	select {
	case <-idle:
	case <-t.C:
	case <-ctx.Done():
	}
}
