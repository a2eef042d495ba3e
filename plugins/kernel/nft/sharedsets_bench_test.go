package nft

import (
	"net/netip"
	"testing"

	"github.com/netclass-dev/netclass/conf/netpol"
	"github.com/netclass-dev/netclass/conf/qos"
)

// BenchmarkRenderDistinctPeers renders a port holding a tenant's policies
// at the bounds (netpolicy.MaxRulesPerAttachment allows, 4 ranges each:
// MaxRangesPerAttachment), every allow's peers distinct from the others'
// only in their last range, the worst case for finding a set to share.
func BenchmarkRenderDistinctPeers(b *testing.B) {
	const allows, ranges = 1000, 4
	var d netpol.Direction
	d.Isolated = true
	for i := range allows {
		var v4 []qos.Range
		for j := range ranges - 1 {
			a := netip.AddrFrom4([4]byte{10, 1, byte(j), 1})
			v4 = append(v4, qos.Range{From: a, To: a})
		}
		last := netip.AddrFrom4([4]byte{10, 2, byte(i >> 8), byte(i)})
		v4 = append(v4, qos.Range{From: last, To: last})
		d.Allow = append(d.Allow, netpol.Allow{V4: v4, V6: []qos.Range{}, Ports: []netpol.PortRange{{Proto: 6, From: 80, To: 80}}})
	}
	plan := &netpol.Plan{Ingress: d}
	b.ReportAllocs()
	for b.Loop() {
		inet, _ := hostPolicyObjects("x", HostPort{Bridge: "br0", Plan: plan}, newElementCache())
		if len(inet.rs.sets) != allows {
			b.Fatalf("%d sets", len(inet.rs.sets))
		}
	}
}
