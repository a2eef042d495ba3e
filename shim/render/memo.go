package render

import (
	"encoding/json"
	"net/netip"
	"sync"

	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/shim/network"
)

// Memo remembers what p resolved, for the time of one sync of the node's
// attachments: each destination of each namespace on each network is
// resolved once, however many attachments' NetworkQoS rules name it (Rules
// remembers within one attachment only). A nil p stays nil (nothing
// resolves). Safe for concurrent use.
func Memo(p Peers) Peers {
	if p == nil {
		return nil
	}
	return &memo{inner: p, seen: map[string]memoEntry{}}
}

type memo struct {
	inner Peers
	mu    sync.Mutex
	seen  map[string]memoEntry
}

type memoEntry struct {
	addrs []netip.Addr
	err   error
}

func (m *memo) Addresses(namespace string, to ncv1.Destination, net network.Network) ([]netip.Addr, error) {
	sel, err := json.Marshal(to)
	if err != nil {
		return m.inner.Addresses(namespace, to, net)
	}
	key := namespace + "\x00" + net.Ref.String() + "\x00" + string(sel)
	m.mu.Lock()
	e, ok := m.seen[key]
	m.mu.Unlock()
	if ok {
		return e.addrs, e.err
	}
	e.addrs, e.err = m.inner.Addresses(namespace, to, net)
	m.mu.Lock()
	m.seen[key] = e
	m.mu.Unlock()
	return e.addrs, e.err
}
