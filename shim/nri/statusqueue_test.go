package nri

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// recordingWriter records the writes it is asked for; writes of claim
// "blocked" wait for gate.
type recordingWriter struct {
	gate    chan struct{}
	started chan types.UID
	mu      sync.Mutex
	writes  []string
}

func (w *recordingWriter) write(_ context.Context, uid types.UID, failures map[string]error) {
	w.started <- uid
	if uid == "blocked" {
		<-w.gate
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes = append(w.writes, string(uid)+":"+failures["dev"].Error())
}

func (w *recordingWriter) got() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.writes)
}

func failure(s string) map[string]error { return map[string]error{"dev": errors.New(s)} }

// While a claim's write runs, the requests made meanwhile are written once,
// after it, with the newest request's failures; every caller returns once a
// write that started after its call finished; another claim does not wait.
func TestStatusWritesOfAClaimAreOrdered(t *testing.T) {
	w := &recordingWriter{gate: make(chan struct{}), started: make(chan types.UID, 10)}
	q := newStatusQueue(w.write)
	ctx := context.Background()
	var callers sync.WaitGroup
	call := func(uid types.UID, f string) {
		callers.Add(1)
		go func() { defer callers.Done(); q.Write(ctx, uid, failure(f)) }()
	}
	call("blocked", "first")
	if uid := <-w.started; uid != "blocked" {
		t.Fatalf("first write of %s", uid)
	}
	waiting := func(n int) {
		deadline := time.Now().Add(10 * time.Second)
		for q.waiting("blocked") != n {
			if time.Now().After(deadline) {
				t.Fatalf("%d callers wait, want %d", q.waiting("blocked"), n)
			}
			time.Sleep(time.Millisecond) // polling a condition with a deadline
		}
	}
	call("blocked", "second")
	waiting(1)
	call("blocked", "third")
	waiting(2)
	q.Write(ctx, "other", failure("x")) // returns while "blocked" is being written
	if uid := <-w.started; uid != "other" {
		t.Fatalf("write of %s, want other's", uid)
	}
	close(w.gate)
	callers.Wait()
	want := []string{"other:x", "blocked:first", "blocked:third"}
	if got := w.got(); !slices.Equal(got, want) {
		t.Fatalf("writes %v, want %v (the second request superseded by the third)", got, want)
	}
}
