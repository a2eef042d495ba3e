package bridgeport

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// The rules step runs beside the devices' removal, neither before nor
// after it, and the after steps only once the devices are gone: a rules
// step that waits for an after step finishes only when both hold.
func TestOverlapRunsRulesBesideTheDevices(t *testing.T) {
	var removed atomic.Bool
	afterRan := make(chan struct{})
	rules := func() error {
		select {
		case <-afterRan:
			return nil
		case <-time.After(10 * time.Second):
			return errors.New("no after step ran while the rules step was running")
		}
	}
	removeDevices := func() error { removed.Store(true); return nil }
	var sawRemoved atomic.Bool
	after := func() error {
		defer close(afterRan)
		sawRemoved.Store(removed.Load())
		return nil
	}
	if err := overlap(rules, removeDevices, []func() error{after}); err != nil {
		t.Fatal(err)
	}
	if !sawRemoved.Load() {
		t.Error("an after step ran before the devices were removed")
	}
}

// A failed removal of the devices skips the after steps (a guard taken away
// from a port that still exists would open it) and is returned with the
// rules step's error.
func TestOverlapSkipsAfterAFailedRemoval(t *testing.T) {
	rulesErr, devErr := errors.New("rules"), errors.New("devices")
	var ran atomic.Bool
	err := overlap(func() error { return rulesErr }, func() error { return devErr },
		[]func() error{func() error { ran.Store(true); return nil }})
	if !errors.Is(err, rulesErr) || !errors.Is(err, devErr) {
		t.Errorf("overlap = %v, want both the rules step's and the removal's errors", err)
	}
	if ran.Load() {
		t.Error("an after step ran although the devices' removal failed")
	}
}
