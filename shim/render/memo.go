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
// remembers within one attachment only), up to MemoBudget addresses. A
// nil p stays nil (nothing resolves). Safe for concurrent use.
func Memo(p Peers) Peers {
	if p == nil {
		return nil
	}
	m := &memo{inner: p}
	m.addrs.Size = func(a []netip.Addr) int { return len(a) }
	m.addrs.Budget = MemoBudget
	return m
}

// MemoBudget bounds the addresses a sync's Memo keeps: what one
// attachment's resolution may hold at most (MaxSelectors selectors of up
// to MaxSelectedAddresses each, ~24 MB), so tenants' selectors cost a sync
// at most twice that, however many attachments name them.
const MemoBudget = MaxSelectors * MaxSelectedAddresses

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
