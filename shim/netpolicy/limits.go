package netpolicy

import (
	"encoding/json"
	"fmt"
	"sync"

	networkingv1 "k8s.io/api/networking/v1"

	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/conf/netpol"
	"github.com/netclass-dev/netclass/shim/network"
	"github.com/netclass-dev/netclass/shim/peers"
)

// Bounds of what NetworkPolicies, which namespace users write, cost
// netclass-dra (root on every node) for one attachment. A rule over a
// bound is left out (which only narrows what is allowed) with a RuleError,
// and a Warning Event on the policy says so (NotEnforced). Real policies
// stay far below them; without them one ingress rule of 20,000 ports took
// ~40,000 nftables rules and ~31 MiB of heap per selected pod (make bench,
// BenchmarkNetworkPolicyHostileTenant, measures a policy at the bounds).
const (
	// MaxPeersPerRule bounds the peers (from, to) of one rule.
	MaxPeersPerRule = 100
	// MaxPortsPerRule bounds the ports of one rule.
	MaxPortsPerRule = 100
	// MaxExceptsPerBlock bounds the except list of one ipBlock.
	MaxExceptsPerBlock = 100
	// MaxRulesPerAttachment bounds the nftables rules one attachment's
	// plan renders (an allow is a rule per family and protocol: its peers
	// and ports are in sets).
	MaxRulesPerAttachment = 1000
	// MaxRangesPerAttachment bounds the address and port ranges in one
	// attachment's sets.
	MaxRangesPerAttachment = 4000
	// MemoBudget bounds the addresses and ports a sync's Memo keeps of
	// what it resolved (~1 M, tens of MB), however many attachments and
	// selectors tenants write; past it, results are resolved again.
	MemoBudget = 1 << 20
)

// ruleBounds checks a rule's own bounds.
func ruleBounds(peers []networkingv1.NetworkPolicyPeer, ports []networkingv1.NetworkPolicyPort) error {
	if len(peers) > MaxPeersPerRule {
		return fmt.Errorf("%d peers, more than the %d netclass enforces in one rule", len(peers), MaxPeersPerRule)
	}
	if len(ports) > MaxPortsPerRule {
		return fmt.Errorf("%d ports, more than the %d netclass enforces in one rule", len(ports), MaxPortsPerRule)
	}
	for i, p := range peers {
		if p.IPBlock != nil && len(p.IPBlock.Except) > MaxExceptsPerBlock {
			return fmt.Errorf("peer %d: ipBlock with %d excepts, more than the %d netclass enforces", i, len(p.IPBlock.Except), MaxExceptsPerBlock)
		}
	}
	return nil
}

// cost is what a direction's allows render to.
type cost struct{ rules, ranges int }

func costOf(allows []netpol.Allow) cost {
	var c cost
	for i := range allows {
		c.add(&allows[i])
	}
	return c
}

// add adds what one allow renders to.
func (c *cost) add(a *netpol.Allow) {
	v4, v6 := a.Families()
	fams := 0
	if v4 {
		fams++
	}
	if v6 {
		fams++
	}
	var seen [256]bool // the protocols, without allocating (withinBudget runs after every rule)
	protos := 0
	for _, p := range a.Ports {
		if !seen[p.Proto] {
			seen[p.Proto], protos = true, protos+1
		}
	}
	c.rules += fams * max(1, protos)
	c.ranges += len(a.V4) + len(a.V6) + len(a.Ports)
}

// directionCost is what a direction's allows and verdicts render to.
func directionCost(d *netpol.Direction) cost {
	c := costOf(d.Allow)
	for _, vs := range [][]netpol.Verdict{d.Admin, d.Baseline} {
		for i := range vs {
			c.add(&vs[i].Match)
		}
	}
	return c
}

// withinBudget checks the plan's rendering against the attachment's bounds.
func withinBudget(plan *netpol.Plan) error {
	in, out := directionCost(&plan.Ingress), directionCost(&plan.Egress)
	if r := in.rules + out.rules; r > MaxRulesPerAttachment {
		return fmt.Errorf("the attachment's policies would take %d nftables rules, more than the %d netclass enforces", r, MaxRulesPerAttachment)
	}
	if r := in.ranges + out.ranges; r > MaxRangesPerAttachment {
		return fmt.Errorf("the attachment's policies would take %d address and port ranges, more than the %d netclass enforces", r, MaxRangesPerAttachment)
	}
	return nil
}

// uniquePeers drops repeated peers of a rule: a rule listing one selector
// a thousand times costs what it costs once.
func uniquePeers(in []networkingv1.NetworkPolicyPeer) []networkingv1.NetworkPolicyPeer {
	seen := make(map[string]bool, len(in))
	out := make([]networkingv1.NetworkPolicyPeer, 0, len(in))
	for _, p := range in {
		k, err := json.Marshal(p)
		if err == nil && seen[string(k)] {
			continue
		}
		seen[string(k)] = true
		out = append(out, p)
	}
	return out
}

// Memo remembers what a Peers resolved, for the time of one sync of the
// node's attachments: each selector of each namespace is resolved once,
// however many rules, policies and attachments name it, and each rule's
// peers are turned into address ranges once (ranges.go), each up to
// MemoBudget.
func Memo(p Peers) Peers {
	m := &memo{inner: p, ranges: map[string]memoRanges{}}
	m.endpoints.Size, m.endpoints.Budget = endpointsSize, MemoBudget
	return m
}

type memo struct {
	inner      Peers
	endpoints  peers.Memo[[]peers.Endpoint]
	mu         sync.Mutex // guards ranges and rangesKept
	ranges     map[string]memoRanges
	rangesKept int
}

func endpointsSize(eps []peers.Endpoint) int {
	n := 0
	for _, ep := range eps {
		n += len(ep.Addrs) + len(ep.Ports)
	}
	return n
}

func (m *memo) Endpoints(namespace string, to ncv1.Destination, net network.Network) ([]peers.Endpoint, error) {
	key, ok := peers.DestinationKey(namespace, to, net)
	if !ok {
		return m.inner.Endpoints(namespace, to, net)
	}
	return m.endpoints.Get(key, func() ([]peers.Endpoint, error) { return m.inner.Endpoints(namespace, to, net) })
}
