package nri

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// statusQueue orders the status writes of each claim. Writes run after the
// NRI reply, in goroutines, and each one reads the claim's checkpoint when
// it runs: two sandboxes of a shared claim finishing close together could
// otherwise leave the older view in the API, written last. Here a claim
// has one writer at a time, and a request made while a write runs is
// written after it, merged with every other request made meanwhile (the
// newest one's failures win: it describes the latest attempt). Claims do
// not wait for each other.
type statusQueue struct {
	write func(ctx context.Context, uid types.UID, failures map[string]error)

	mu      sync.Mutex
	pending map[types.UID]*statusRequest // made, not yet being written
	writing map[types.UID]bool
}

// statusRequest is a claim's pending write and the callers waiting for it.
type statusRequest struct {
	failures map[string]error
	waiters  []chan struct{}
}

func newStatusQueue(write func(context.Context, types.UID, map[string]error)) *statusQueue {
	return &statusQueue{write: write, pending: map[types.UID]*statusRequest{}, writing: map[types.UID]bool{}}
}

// Write has the claim's status written with failures and returns once a
// write that started after this call has finished (this caller's, or a
// later caller's that superseded it).
func (q *statusQueue) Write(ctx context.Context, uid types.UID, failures map[string]error) {
	done := make(chan struct{})
	q.mu.Lock()
	r := q.pending[uid]
	if r == nil {
		r = &statusRequest{}
		q.pending[uid] = r
	}
	r.failures, r.waiters = failures, append(r.waiters, done)
	if q.writing[uid] {
		q.mu.Unlock()
		<-done // the claim's writer writes it after its current write
		return
	}
	q.writing[uid] = true
	q.mu.Unlock()
	q.drain(ctx, uid)
}

// drain writes the claim's pending requests until none is left; the caller
// is the claim's writer.
func (q *statusQueue) drain(ctx context.Context, uid types.UID) {
	for {
		q.mu.Lock()
		r := q.pending[uid]
		delete(q.pending, uid)
		if r == nil {
			delete(q.writing, uid)
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
		q.write(ctx, uid, r.failures)
		for _, w := range r.waiters {
			close(w)
		}
	}
}

// waiting is the number of callers whose write has not started (tests).
func (q *statusQueue) waiting(uid types.UID) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	if r := q.pending[uid]; r != nil {
		return len(r.waiters)
	}
	return 0
}
