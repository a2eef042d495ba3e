package nri

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// locks orders the work on claims. Work on a claim — a sandbox of a pod that
// uses it, its Unprepare, its reconciliation — holds the claim's lock, so the
// work of one claim is ordered and the work of unrelated claims runs in
// parallel (a burst of pods is not queued behind one node-wide lock). Work
// that must see every attachment at once (CNI GC) holds all of them:
// it waits for the claims' holders to finish and keeps new ones out, and
// while it waits no new holder starts (it cannot be starved). Every wait
// ends with the caller's context.
type locks struct {
	mu        sync.Mutex
	held      map[types.UID]bool
	exclusive bool
	waiting   int           // exclusive holders waiting
	parked    int           // callers waiting for a release (tests read it)
	changed   chan struct{} // closed and replaced at every release
}

func newLocks() *locks {
	return &locks{held: map[types.UID]bool{}, changed: make(chan struct{})}
}

// lock takes the locks of the claims, all or none, and returns their release.
func (l *locks) lock(ctx context.Context, claims ...types.UID) (func(), error) {
	claims = slices.Compact(slices.Sorted(slices.Values(claims)))
	busy := func() bool {
		return l.exclusive || l.waiting > 0 || slices.ContainsFunc(claims, func(c types.UID) bool { return l.held[c] })
	}
	l.mu.Lock()
	for busy() {
		if err := l.wait(ctx); err != nil {
			return nil, fmt.Errorf("netclass-dra is busy with the same claim (or collecting garbage): %w", err)
		}
		l.mu.Lock()
	}
	for _, c := range claims {
		l.held[c] = true
	}
	l.mu.Unlock()
	return func() { l.release(func() { l.unhold(claims) }) }, nil
}

// lockAll takes every claim's lock, present and future, until released.
func (l *locks) lockAll(ctx context.Context) (func(), error) {
	l.mu.Lock()
	l.waiting++
	for l.exclusive || len(l.held) > 0 {
		if err := l.wait(ctx); err != nil {
			l.mu.Lock()
			l.waiting--
			l.broadcast() // claims that waited behind this one may go
			l.mu.Unlock()
			return nil, fmt.Errorf("netclass-dra is busy: %w", err)
		}
		l.mu.Lock()
	}
	l.waiting--
	l.exclusive = true
	l.mu.Unlock()
	return func() { l.release(func() { l.exclusive = false }) }, nil
}

// wait releases l.mu (held by the caller) and waits for the next release;
// the caller locks l.mu again to look.
func (l *locks) wait(ctx context.Context) error {
	ch := l.changed
	l.parked++
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.parked--
		l.mu.Unlock()
	}()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l *locks) unhold(claims []types.UID) {
	for _, c := range claims {
		delete(l.held, c)
	}
}

func (l *locks) release(undo func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	undo()
	l.broadcast()
}

// broadcast wakes every waiter; l.mu is held.
func (l *locks) broadcast() {
	close(l.changed)
	l.changed = make(chan struct{})
}
