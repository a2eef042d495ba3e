package peers

import (
	"encoding/json"
	"sync"

	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/shim/network"
)

// Memo remembers what was resolved, for the time of one sync of the node's
// attachments (NetworkPolicy peers, NetworkQoS destinations): each key is
// resolved once, however many rules and attachments name it. What it keeps
// is bounded: with Size set, results whose sizes would take the sum kept
// past Budget are not kept (resolved again when named again), so tenants'
// selectors cost a sync no more memory than Budget on top of what one
// attachment's resolution holds. The zero Memo keeps everything; it is
// safe for concurrent use.
type Memo[T any] struct {
	Size   func(T) int
	Budget int

	mu   sync.Mutex
	seen map[string]memoEntry[T]
	kept int
}

type memoEntry[T any] struct {
	v   T
	err error
}

// Get returns what key resolved to, calling resolve the first time.
func (m *Memo[T]) Get(key string, resolve func() (T, error)) (T, error) {
	m.mu.Lock()
	e, ok := m.seen[key]
	m.mu.Unlock()
	if ok {
		return e.v, e.err
	}
	e.v, e.err = resolve()
	m.mu.Lock()
	defer m.mu.Unlock()
	if kept, ok := m.seen[key]; ok { // resolved meanwhile by another caller
		return kept.v, kept.err
	}
	if m.Size != nil {
		n := m.Size(e.v)
		if m.kept+n > m.Budget {
			return e.v, e.err
		}
		m.kept += n
	}
	if m.seen == nil {
		m.seen = map[string]memoEntry[T]{}
	}
	m.seen[key] = e
	return e.v, e.err
}

// DestinationKey names a destination of an object of namespace on net: its
// JSON (equal selectors give equal text). ok is false when it has none.
func DestinationKey(namespace string, to ncv1.Destination, net network.Network) (key string, ok bool) {
	b, err := json.Marshal(to)
	return namespace + "\x00" + net.Ref.String() + "\x00" + string(b), err == nil
}
