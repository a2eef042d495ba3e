package nri

import (
	"context"
	"errors"
	"testing"
	"time"
)

// expired is a context that has already ended: a lock that would wait fails
// at once.
func expired() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

func TestLocksOrderEachClaim(t *testing.T) {
	l := newLocks()
	ctx := context.Background()
	releaseA, err := l.lock(ctx, "a", "b")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.lock(expired(), "b"); !errors.Is(err, context.Canceled) {
		t.Fatalf("b while a+b are held: %v, want to wait", err)
	}
	releaseC, err := l.lock(expired(), "c")
	if err != nil {
		t.Fatalf("an unrelated claim waited: %v", err)
	}
	got := make(chan error, 1)
	go func() {
		release, err := l.lock(ctx, "b", "c")
		if err == nil {
			release()
		}
		got <- err
	}()
	releaseA()
	select {
	case err := <-got:
		t.Fatalf("b+c taken while c is held: %v", err)
	default:
	}
	releaseC()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}

// parkedAtLeast polls, with a deadline, until n callers wait for a release.
func parkedAtLeast(t *testing.T, l *locks, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		l.mu.Lock()
		parked := l.parked
		l.mu.Unlock()
		if parked >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d callers waiting, want %d", parked, n)
		}
		time.Sleep(time.Millisecond) // polling a condition with a deadline
	}
}

func TestLockAllWaitsForHoldersAndKeepsNewOnesOut(t *testing.T) {
	l := newLocks()
	ctx := context.Background()
	releaseA, err := l.lock(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	all := make(chan func(), 1)
	go func() {
		release, err := l.lockAll(ctx)
		if err != nil {
			t.Error(err)
		}
		all <- release
	}()
	parkedAtLeast(t, l, 1)
	// lockAll waits: new claims wait behind it (it is not starved)
	if _, err := l.lock(expired(), "b"); err == nil {
		t.Fatal("a new claim went ahead of a waiting lockAll")
	}
	releaseA()
	releaseAll := <-all
	if _, err := l.lock(expired(), "b"); err == nil {
		t.Fatal("a claim taken while every claim is held")
	}
	releaseAll()
	if release, err := l.lock(expired(), "b"); err != nil {
		t.Fatalf("after lockAll released: %v", err)
	} else {
		release()
	}
}

func TestLockAllGivingUpLetsClaimsGo(t *testing.T) {
	l := newLocks()
	releaseA, err := l.lock(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error, 1)
	go func() { _, err := l.lockAll(ctx); gaveUp <- err }()
	parkedAtLeast(t, l, 1)
	waiter := make(chan error, 1)
	go func() {
		release, err := l.lock(context.Background(), "b") // waits behind lockAll
		if err == nil {
			release()
		}
		waiter <- err
	}()
	parkedAtLeast(t, l, 2)
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("lockAll: %v", err)
	}
	if err := <-waiter; err != nil {
		t.Fatalf("a claim waiting behind a lockAll that gave up: %v", err)
	}
	releaseA()
}
