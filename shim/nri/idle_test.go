package nri

import (
	"context"
	"testing"
	"time"
)

func TestWaitIdleYieldsToSandboxesInFlight(t *testing.T) {
	p := &Plugin{inflight: newInflight()}
	ctx := context.Background()
	p.WaitIdle(ctx, time.Hour) // nothing in flight: returns at once

	done := p.inflight.start()
	other := p.inflight.start()
	returned := make(chan struct{})
	go func() { p.WaitIdle(ctx, time.Hour); close(returned) }()
	done()
	select {
	case <-returned:
		t.Fatal("WaitIdle returned while a sandbox was still in flight")
	case <-time.After(50 * time.Millisecond): // it would have returned by now if it were going to
	}
	other()
	<-returned // the last one out wakes it

	defer p.inflight.start()()
	start := time.Now()
	p.WaitIdle(ctx, 20*time.Millisecond) // bounded: background work is delayed, never starved
	if time.Since(start) > 5*time.Second {
		t.Error("WaitIdle overran its bound")
	}
}
