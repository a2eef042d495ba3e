//go:build testbed

package e2e

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/controller/condition"
	"github.com/netclass-dev/netclass/test/e2e/harness"
	"github.com/netclass-dev/netclass/test/testbed"
)

// A tenant's Network deleted while its pod runs on node 1 keeps its VNI: another
// namespace's Network asking for it is in conflict and offered on no node (node 2, where
// the pod is not, included: the VNI reaches node 1's bridge over the fabric) until the pod
// is gone; then the deleted Network goes and the other one gets the VNI on both nodes.
func TestDeletedNetworkKeepsItsVNIWhileUsed(t *testing.T) {
	e := harness.Shared(t)
	n1, n2 := twoNodes(t, e)
	class := e.Class(t, harness.NetworkKind)
	cluster := autoVXLANCluster(t, e)
	owner, other := testbed.Namespace(t, e.Kube), testbed.Namespace(t, e.Kube)
	vni := harness.RandomVNI()
	e.Network(t, owner, "red", cluster, vni, harness.RandomSubnet())
	e.WaitDeviceOn(t, n1.Name, class, owner, "red", true)
	e.ClaimTemplate(t, owner, "red", class, owner, "red", nil)
	e.RunPods(t, harness.PodOn(n1.Name, owner, "a", "red"))
	e.Attached(t, owner, "a", "red", "net1")
	if err := e.NC.NetclassV1alpha1().Networks(owner).Delete(testbed.Context(t, time.Minute), "red", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.WaitDeviceOn(t, n1.Name, class, owner, "red", false)

	e.Network(t, other, "late", cluster, vni, harness.RandomSubnet())
	lateReady := func(reason string) {
		t.Helper()
		testbed.Poll(t, testbed.Context(t, harness.WaitTimeout), 100*time.Millisecond, "Network "+other+"/late Ready reason "+reason,
			func(ctx context.Context) (bool, string, error) {
				n, err := e.NC.NetclassV1alpha1().Networks(other).Get(ctx, "late", metav1.GetOptions{})
				if err != nil {
					return false, "", err
				}
				c := condition.Get(n.Status.Conditions, "Ready")
				return c != nil && c.Reason == reason && c.ObservedGeneration == n.Generation, describeCondition(c), nil
			})
	}
	lateReady(ncv1.ReasonSegmentConflict)
	if red, err := e.NC.NetclassV1alpha1().Networks(owner).Get(testbed.Context(t, time.Minute), "red", metav1.GetOptions{}); err != nil ||
		!condition.IsTrue(red.Status.Conditions, ncv1.ConditionInUse) {
		t.Fatalf("the deleted Network in use: %v %v", err, red)
	}
	for _, n := range []string{n1.Name, n2.Name} {
		if _, ok, err := e.FindDeviceOn(testbed.Context(t, time.Minute), n, class, other, "late"); err != nil || ok {
			t.Errorf("Network %s/late on the deleted Network's VNI published on %s (err %v)", other, n, err)
		}
	}

	deletePod(t, e, owner, "a")
	waitGone(t, e, owner, "a")
	testbed.Poll(t, testbed.Context(t, harness.WaitTimeout), 100*time.Millisecond, "Network "+owner+"/red gone",
		func(ctx context.Context) (bool, string, error) {
			_, err := e.NC.NetclassV1alpha1().Networks(owner).Get(ctx, "red", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return true, "", nil
			}
			return false, "still there", err
		})
	lateReady("Ready")
	e.WaitDeviceOn(t, n1.Name, class, other, "late", true)
	e.WaitDeviceOn(t, n2.Name, class, other, "late", true)
}

func describeCondition(c *metav1.Condition) string {
	if c == nil {
		return "no condition"
	}
	return string(c.Status) + "/" + c.Reason + ": " + c.Message
}
