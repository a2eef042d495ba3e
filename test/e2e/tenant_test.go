//go:build testbed

package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/test/e2e/harness"
	"github.com/netclass-dev/netclass/test/testbed"
)

// tenantNetwork is a Network as a tenant writes it.
func tenantNetwork(name, cluster string, vni int32, ipam string) string {
	return fmt.Sprintf(`apiVersion: netclass.dev/v1alpha1
kind: Network
metadata: {name: %s}
spec:
  clusterNetworkName: %s
  vni: %d
  ipam: %s
`, name, cluster, vni, ipam)
}

// waitNetworkReady waits for a Network's Ready condition with the reason and a
// message naming want.
func waitNetworkReady(t *testing.T, e *harness.Env, ns, name string, status metav1.ConditionStatus, reason, want string) {
	t.Helper()
	testbed.Poll(t, testbed.Context(t, time.Minute), 200*time.Millisecond, fmt.Sprintf("Network %s/%s Ready=%s %s", ns, name, status, reason),
		func(ctx context.Context) (bool, string, error) {
			n, err := e.NC.NetclassV1alpha1().Networks(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			for _, c := range n.Status.Conditions {
				if c.Type == ncv1.ConditionReady {
					ok := c.Status == status && c.Reason == reason && strings.Contains(c.Message, want) && c.ObservedGeneration == n.Generation
					return ok, fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message), nil
				}
			}
			return false, "no Ready condition", nil
		})
}

// waitNotOffered waits until netclass-dra says on every node that it does not
// offer the network, and checks that no node publishes a device of it.
func waitNotOffered(t *testing.T, e *harness.Env, class, ns, name string) {
	t.Helper()
	line := fmt.Sprintf(`"Network not offered on this node" network="Network %s/%s"`, ns, name)
	for _, d := range e.DRAs {
		testbed.Poll(t, testbed.Context(t, time.Minute), 200*time.Millisecond, "netclass-dra refusing "+ns+"/"+name+" on node "+d.Node,
			func(context.Context) (bool, string, error) { return strings.Contains(d.Logs(), line), "", nil })
		if _, found, err := e.FindDeviceOn(testbed.Context(t, time.Minute), d.Node, class, ns, name); err != nil || found {
			t.Fatalf("node %s publishes a device of the refused Network %s/%s (err %v)", d.Node, ns, name, err)
		}
	}
}

// A namespace user, with a Role on its own namespace and kubectl, cannot make
// netclass run what it chooses as root, take another network's segment, or
// take static addresses the admin did not allow: each bad object gets a
// condition and an event naming the field, and nothing of it runs.
func TestTenantCannotChooseWhatRuns(t *testing.T) {
	e := harness.Shared(t)
	class := e.Class(t, harness.NetworkKind)
	vni, other := harness.RandomVNI(), harness.RandomVNI()
	cluster, cluster2 := e.VXLANCluster(t, vni), e.VXLANCluster(t, other)
	neighbour := testbed.Namespace(t, e.Kube)
	e.Network(t, neighbour, "taken", cluster2, other, harness.RandomSubnet())
	e.WaitDevice(t, class, neighbour, "taken", true)
	ns := testbed.Namespace(t, e.Kube)
	tenant := e.Tenant(t, ns)
	const evilDir = "/run/netclass-e2e-tenant-dir"
	t.Cleanup(func() { os.RemoveAll(evilDir) })

	// IPAM that names a directory on the node: refused, field named, nothing runs.
	// (An invalid Network still holds its segment: the good one below takes another.)
	tenant.Apply(t, tenantNetwork("evil", cluster, harness.RandomVNI(),
		fmt.Sprintf(`{type: host-local, dataDir: %s, ranges: [[{subnet: %s}]]}`, evilDir, harness.RandomSubnet())))
	waitNetworkReady(t, e, ns, "evil", metav1.ConditionFalse, ncv1.ReasonInvalidConfig, "spec.ipam.dataDir")
	testbed.Poll(t, testbed.Context(t, time.Minute), 200*time.Millisecond, "InvalidConfig event on the Network",
		func(ctx context.Context) (bool, string, error) {
			ev := testbed.Events(ctx, e.Kube, ns, "evil")
			return strings.Contains(ev, "InvalidConfig") && strings.Contains(ev, "spec.ipam.dataDir"), ev, nil
		})
	waitNotOffered(t, e, class, ns, "evil")
	// Another IPAM plugin than the ClusterNetwork's (one that reads a kubeconfig).
	tenant.Apply(t, tenantNetwork("foreign", cluster, harness.RandomVNI(), `{type: whereabouts, kubernetes: {kubeconfig: /etc/kubernetes/admin.conf}}`))
	waitNetworkReady(t, e, ns, "foreign", metav1.ConditionFalse, ncv1.ReasonInvalidConfig, "spec.ipam.type")
	waitNotOffered(t, e, class, ns, "foreign")

	// The neighbour's VNI under another ClusterNetwork: the segment is taken.
	tenant.Apply(t, tenantNetwork("copycat", cluster, other, fmt.Sprintf(`{ranges: [[{subnet: %s}]]}`, harness.RandomSubnet())))
	waitNetworkReady(t, e, ns, "copycat", metav1.ConditionFalse, ncv1.ReasonSegmentConflict, fmt.Sprintf("VNI %d is already used by a Network of another namespace", other))
	waitNotOffered(t, e, class, ns, "copycat")
	// The neighbour keeps it, though copycat may have been created in the
	// same second and its namespace's name may sort first.
	waitNetworkReady(t, e, neighbour, "taken", metav1.ConditionTrue, ncv1.ReasonReady, "")
	e.WaitDevice(t, class, neighbour, "taken", true)

	// Its own segment with ranges of the ClusterNetwork's type: fine.
	tenant.Apply(t, tenantNetwork("good", cluster, vni, fmt.Sprintf(`{ranges: [[{subnet: %s}]]}`, harness.RandomSubnet())))
	waitNetworkReady(t, e, ns, "good", metav1.ConditionTrue, ncv1.ReasonReady, "")
	e.WaitDevice(t, class, ns, "good", true)
	e.ForgetNetwork(ns+"_good", vni)

	// A static MAC on a network whose ClusterNetwork does not allow it.
	tenant.Apply(t, fmt.Sprintf(`apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: spoof}
spec:
  spec:
    devices:
      requests:
      - name: net
        exactly:
          deviceClassName: %s
          selectors:
          - cel: {expression: 'device.attributes["resource.kubernetes.io"].podNetwork == "good"'}
      config:
      - requests: [net]
        opaque:
          driver: netclass.dev
          parameters: {apiVersion: netclass.dev/v1alpha1, kind: AttachmentConfig, mac: "02:00:00:00:00:01"}
---
apiVersion: v1
kind: Pod
metadata: {name: spoofer}
spec:
  containers:
  - {name: main, image: %s, imagePullPolicy: Never, command: [sleep, "3600"]}
  resourceClaims:
  - {name: spoof, resourceClaimTemplateName: spoof}
`, class, testbed.Image))
	claim := e.ClaimOfPod(t, ns, "spoofer", "spoof")
	e.WaitClaimStatus(t, ns, claim.Name, func(d resourceapi.AllocatedDeviceStatus) bool {
		c := harness.ReadyCondition(d)
		return c != nil && c.Status == metav1.ConditionFalse && strings.Contains(c.Message, "mac: Network "+ns+"/good does not allow static addresses")
	})
	testbed.Poll(t, testbed.Context(t, time.Minute), 250*time.Millisecond, "NetworkPrepareFailed event on the pod",
		func(ctx context.Context) (bool, string, error) {
			ev := testbed.Events(ctx, e.Kube, ns, "spoofer")
			return strings.Contains(ev, "NetworkPrepareFailed") && strings.Contains(ev, "static addresses"), ev, nil
		})
	if _, err := os.Stat(evilDir); !os.IsNotExist(err) {
		t.Fatalf("the tenant's dataDir %s exists on the node (%v)", evilDir, err)
	}
}

// In slot mode each device is one attachment: a claim of another namespace
// must not be allocated a slot of a namespaced network (the claim namespace
// guard of conf/deploy), or it would hold the slot the owner needs.
func TestSlotsStayInTheirNamespace(t *testing.T) {
	e := harness.Shared(t)
	e.DRA.RestartWith(t, "--no-shared-devices", "--fallback-slots=1")
	t.Cleanup(func() { e.DRA.RestartWith(t) })
	class := e.Class(t, harness.NetworkKind)
	vni := harness.RandomVNI()
	cluster := e.VXLANCluster(t, vni)
	owner, other := testbed.Namespace(t, e.Kube), testbed.Namespace(t, e.Kube)
	e.Network(t, owner, "red", cluster, vni, harness.RandomSubnet())
	e.WaitDevice(t, class, owner, "red", true)

	e.ClaimTemplate(t, other, "red", class, owner, "red", nil)
	e.CreatePod(t, harness.Pod(other, "intruder", "red"))
	waitUnschedulable(t, e, other, "intruder")
	e.ClaimTemplate(t, owner, "red", class, owner, "red", nil)
	e.RunPods(t, harness.Pod(owner, "tenant", "red"))
	e.Attached(t, owner, "tenant", "red", "net1")
}

// waitUnschedulable waits for the scheduler to report the pod unschedulable.
func waitUnschedulable(t *testing.T, e *harness.Env, ns, pod string) {
	t.Helper()
	testbed.Poll(t, testbed.Context(t, time.Minute), 250*time.Millisecond, pod+" unschedulable", func(ctx context.Context) (bool, string, error) {
		p, err := e.Kube.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("phase %s, conditions %+v", p.Status.Phase, p.Status.Conditions), nil
	})
}
