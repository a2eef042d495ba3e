//go:build testbed

package e2e

import (
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netclass-dev/netclass/test/e2e/harness"
	"github.com/netclass-dev/netclass/test/testbed"
)

// A node joins the running cluster (Env.AddNode): the netclass-dra started
// on it publishes the networks in the node's pool and a pod pinned there
// gets its interface. Then it leaves (Env.RemoveNode): its Node object, its
// slices and its namespaces go, and the other nodes keep their devices.
func TestNodeJoinsAndLeaves(t *testing.T) {
	e := harness.Shared(t)
	n := e.BridgeNet(t, "e2e-join", "net")
	node := e.AddNode(t, "")
	e.WaitDeviceOn(t, node.Name, n.Class, "", n.PodNetwork, true)
	e.RunPods(t, harness.PodOn(node.Name, n.Namespace, "joined", "net"))
	if a := e.Attached(t, n.Namespace, "joined", "net", "net1"); a.Pool != node.Name {
		t.Fatalf("the pod on node %s got a device of pool %s", node.Name, a.Pool)
	}

	e.RemoveNode(t, node.Name)
	if _, err := e.Kube.CoreV1().Nodes().Get(testbed.Context(t, harness.WaitTimeout), node.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("Node %s after it left: %v, want not found", node.Name, err)
	}
	e.WaitNoSlices(t, node.Name)
	if node.Exists() {
		t.Fatalf("the namespaces of node %s are still there", node.Name)
	}
	for _, other := range e.Nodes {
		e.WaitDeviceOn(t, other.Name, n.Class, "", n.PodNetwork, true)
	}
}
