package render

import (
	"net/netip"

	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/shim/network"
	"github.com/netclass-dev/netclass/shim/peers"
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
	return &memo{inner: p}
}

type memo struct {
	inner Peers
	addrs peers.Memo[[]netip.Addr]
}

func (m *memo) Addresses(namespace string, to ncv1.Destination, net network.Network) ([]netip.Addr, error) {
	key, ok := peers.DestinationKey(namespace, to, net)
	if !ok {
		return m.inner.Addresses(namespace, to, net)
	}
	return m.addrs.Get(key, func() ([]netip.Addr, error) { return m.inner.Addresses(namespace, to, net) })
}
