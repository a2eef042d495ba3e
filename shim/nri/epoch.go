package nri

import "sync"

// epochs orders attachments against the runtime's sandbox lists. NRI's
// Synchronize hands over the sandboxes that exist at one moment, and the
// reconciliation runs later, after sandboxes started meanwhile may have been
// attached: such an attachment is missing from the list, yet its sandbox is
// alive. Each list starts a new epoch; an attachment remembers the epoch it
// was made in, and reconciliation never deletes one made in or after the
// epoch of the list it works from.
type epochs struct {
	mu       sync.Mutex
	current  uint64
	attached map[string]uint64 // sandbox ID → epoch of its latest attachment
}

// snapshot starts a new epoch for a sandbox list taken now.
func (e *epochs) snapshot() uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.current++
	return e.current
}

// attaching records that the sandbox gets an attachment now.
func (e *epochs) attaching(sandbox string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.attached == nil {
		e.attached = map[string]uint64{}
	}
	e.attached[sandbox] = e.current
}

// since reports whether the sandbox was attached in or after the epoch.
func (e *epochs) since(sandbox string, epoch uint64) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	at, ok := e.attached[sandbox]
	return ok && at >= epoch
}

// forget drops a sandbox whose attachments are gone.
func (e *epochs) forget(sandbox string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.attached, sandbox)
}
