//go:build testbed

package e2e

import (
	"testing"

	cnpv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/netclass-dev/netclass/test/e2e/harness"
)

// TestNetworkPolicySurvivesSIGKILL with ClusterNetworkPolicies: Admin and
// Baseline policies on namespace A's web server change while node 1's
// netclass-dra is SIGKILLed and restarted (an Admin Deny of TCP 9005
// first, an Admin Accept of one port then the other from the clients, an
// Admin Pass from namespace B's pods on UDP every third edit, a Baseline
// Deny of the rest); TCP 9005 is never answered meanwhile, and afterwards
// node 1's tables equal the plans the objects give and every probe is as
// policyeval says.
func TestClusterNetworkPolicySurvivesSIGKILL(t *testing.T) {
	e := harness.Shared(t)
	b := newPolBed(t, e)
	c := newCNPBed(t, e, b)
	admin, baseline := cnpv1beta1.AdminTier, cnpv1beta1.BaselineTier
	web := c.onPods("web", "team", "a")
	killDuringEdits(t, e, b, func(i int) {
		t.Helper()
		open := []int32{80, 8080}[i%2] // never 9005
		ps := cnps(
			c.cnp("kill-deny", admin, 1, web, cnpIn(cnpDeny, c.nsPeer(), onTCP(9005))),
			c.cnp("kill-accept", admin, 2, web, cnpIn(cnpAccept, c.podPeer("client"), onTCP(open))),
			c.cnp("kill-base", baseline, 1, web, cnpIn(cnpDeny, c.nsPeer())))
		if i%3 == 0 {
			ps = append(ps, c.cnp("kill-pass", admin, 3, web, cnpIn(cnpPass, c.nsPeer("team", "b"), onUDP())))
		}
		c.write(t, ps)
		b.world.Cluster = ps
	})
}
