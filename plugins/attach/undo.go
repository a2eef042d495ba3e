package attach

import (
	"errors"
	"sync"
)

// Undo collects the inverse of every step of an ADD, so a failed ADD leaves
// nothing behind: Run executes them in reverse order.
type Undo struct {
	steps []func() error
}

// Push records the inverse of a step that just succeeded.
func (u *Undo) Push(step func() error) { u.steps = append(u.steps, step) }

// Run undoes every recorded step, last first, and reports what could not
// be undone.
func (u *Undo) Run() error {
	var errs []error
	for i := len(u.steps) - 1; i >= 0; i-- {
		errs = append(errs, u.steps[i]())
	}
	u.steps = nil
	return errors.Join(errs...)
}

// Parallel runs independent steps at once and joins their errors. Teardown
// steps that each wait for the kernel (an RCU grace period to delete a
// link or an nftables table, an IPAM plugin to exit) then overlap instead
// of adding up.
func Parallel(steps ...func() error) error {
	errs := make([]error, len(steps))
	var wg sync.WaitGroup
	for i, step := range steps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = step()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// WithIPAM runs IPAM allocation (alloc) and interface creation (create)
// concurrently, or — when the IPAM plugin needs the pod's interface to
// allocate, as dhcp does (its daemon sends from the interface) — creation
// first. Both errors are returned, as Parallel does.
func WithIPAM(ipam IPAM, alloc, create func() error) error {
	if ipam.NeedsInterface() {
		if err := create(); err != nil {
			return err
		}
		return alloc()
	}
	return Parallel(alloc, create)
}
