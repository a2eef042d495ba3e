package network

import (
	"strings"
	"testing"

	"github.com/netclass-dev/netclass/conf/netspec"
)

// A network's dscpPolicy (a PodNetwork's parameters, a ClusterNetwork's
// rendering) is read into the Network, and an invalid one keeps the
// network from being offered.
func TestDSCPPolicyRead(t *testing.T) {
	params := strings.Replace(bridgeParams, `"bridge":"blue0",`, `"bridge":"blue0","dscpPolicy":{"allowed":[{"first":0,"last":40}]},`, 1)
	n, skip := FromPodNetwork("netclass", podNetwork("blue", params), &netspec.Node{})
	if skip != nil {
		t.Fatalf("not offered: %v", skip)
	}
	if p := n.DSCPPolicy; p == nil || !p.Allows(40) || p.Allows(41) {
		t.Errorf("DSCPPolicy = %+v, want 0-40", p)
	}
	bad := strings.Replace(bridgeParams, `"bridge":"blue0",`, `"bridge":"blue0","dscpPolicy":{"allowed":[{"first":8,"last":15}]},`, 1)
	if _, skip := FromPodNetwork("netclass", podNetwork("blue", bad), &netspec.Node{}); skip == nil || !strings.Contains(skip.Message, "dscpPolicy.remark") {
		t.Errorf("a policy leaving out 0 without remark: skip %v, want it named", skip)
	}
}
