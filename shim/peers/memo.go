package peers

import (
	"encoding/json"
	"sync"

	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/shim/network"
)

// Memo remembers what was resolved, for the time of one sync of the node's
// attachments (NetworkPolicy peers, NetworkQoS destinations): each key is
// resolved once, however many rules and attachments name it. The zero
// Memo is ready to use; it is safe for concurrent use.
type Memo[T any] struct {
	mu   sync.Mutex
	seen map[string]memoEntry[T]
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
	if m.seen == nil {
		m.seen = map[string]memoEntry[T]{}
	}
	m.seen[key] = e
	m.mu.Unlock()
	return e.v, e.err
}

// DestinationKey names a destination of an object of namespace on net: its
// JSON (equal selectors give equal text). ok is false when it has none.
func DestinationKey(namespace string, to ncv1.Destination, net network.Network) (key string, ok bool) {
	b, err := json.Marshal(to)
	return namespace + "\x00" + net.Ref.String() + "\x00" + string(b), err == nil
}
