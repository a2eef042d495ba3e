package qosstatus

import (
	"context"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"github.com/netclass-dev/netclass/shim/ruleagent"
)

// Background writes the node's entries out of the agent's sync: Observe
// only records the sync's outcomes and returns, and Run writes the latest
// ones recorded (a burst of syncs is one write of the newest), each write
// bounded by Timeout, so a slow API server delays the status, never the
// enforcement of the next change.
type Background struct {
	Writer  *Writer
	Timeout time.Duration

	mu     sync.Mutex
	latest []ruleagent.Outcome
	dirty  bool
	kick   chan struct{}
	once   sync.Once
}

func (b *Background) init() { b.once.Do(func() { b.kick = make(chan struct{}, 1) }) }

// Observe records a sync's outcomes for the next write.
func (b *Background) Observe(_ context.Context, outs []ruleagent.Outcome) {
	b.init()
	b.mu.Lock()
	b.latest, b.dirty = outs, true
	b.mu.Unlock()
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

// Run writes until ctx ends.
func (b *Background) Run(ctx context.Context) {
	b.init()
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.kick:
		}
		b.mu.Lock()
		outs, dirty := b.latest, b.dirty
		b.dirty = false
		b.mu.Unlock()
		if !dirty {
			continue
		}
		wctx, cancel := context.WithTimeout(ctx, b.Timeout)
		if err := b.Writer.Write(wctx, outs); err != nil {
			klog.FromContext(ctx).Error(err, "Writing the node's NetworkQoS status failed; the next sync writes it again")
		}
		cancel()
	}
}
