package attach

import "errors"

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
