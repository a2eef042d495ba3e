//go:build testbed

package deploy

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"

	demotraffic "github.com/netclass-dev/netclass/demo/traffic"
	"github.com/netclass-dev/netclass/test/e2e/harness"
	"github.com/netclass-dev/netclass/test/testbed/bed"
)

// podNetNS is the network namespace of a pod's net1 on node n (the primary node: its
// paths are this machine's), from the checkpoint of the chart's netclass-dra there (its
// --state-dir is the node's /var/lib/netclass).
func podNetNS(t *testing.T, n bed.Node, pod string, uid types.UID) *demotraffic.NS {
	t.Helper()
	claims, err := harness.ReadCheckpoint(n.HostPath("/var/lib/netclass"))
	if err != nil {
		t.Fatalf("read the checkpoint of node %s: %v", n.Name, err)
	}
	a, ok := harness.FindAttachment(claims, uid, "net1")
	if !ok {
		t.Fatalf("no attachment of pod %s in the checkpoint of node %s", pod, n.Name)
	}
	return &demotraffic.NS{Name: pod, Path: a.NetNS}
}
