package netpolicy

import (
	"encoding/json"
	"slices"

	networkingv1 "k8s.io/api/networking/v1"

	"github.com/netclass-dev/netclass/conf/qos"
	"github.com/netclass-dev/netclass/shim/network"
)

// memoRanges is what one rule's peers resolved to.
type memoRanges struct{ v4, v6 []qos.Range }

// rangesKey names what a rule's peers resolve to: the policy's namespace,
// the network and the peers exactly (their JSON: equal peers give equal
// text). ok is false when it cannot be had.
func rangesKey(namespace string, peers []networkingv1.NetworkPolicyPeer, net network.Network) (string, bool) {
	b, err := json.Marshal(peers)
	return namespace + "\x00" + net.Ref.String() + "\x00" + string(b), err == nil
}

// rangesOf is peerRanges, remembered by res when it is a Memo: the
// attachments of one sync compile the same rules against the same pods (a
// policy selecting 100 pods is otherwise 100 resolutions of each of its
// peers). Failures are not remembered (their errors name the peer); the
// callers get copies, never the remembered slices.
func rangesOf(p *networkingv1.NetworkPolicy, peers []networkingv1.NetworkPolicyPeer, t Target, res Peers) (v4, v6 []qos.Range, err error) {
	m, isMemo := res.(*memo)
	if !isMemo {
		return peerRanges(p, peers, t, res)
	}
	key, ok := rangesKey(p.Namespace, peers, t.Network)
	m.mu.Lock()
	r, found := m.ranges[key]
	m.mu.Unlock()
	if ok && found {
		return slices.Clone(r.v4), slices.Clone(r.v6), nil
	}
	if v4, v6, err = peerRanges(p, peers, t, m); err != nil || !ok {
		return v4, v6, err
	}
	m.mu.Lock()
	_, kept := m.ranges[key]                                           // computed meanwhile by another caller
	if n := len(v4) + len(v6); !kept && m.rangesKept+n <= MemoBudget { // past it: computed again when named again
		m.rangesKept += n
		m.ranges[key] = memoRanges{v4: slices.Clone(v4), v6: slices.Clone(v6)}
	}
	m.mu.Unlock()
	return v4, v6, nil
}
