//go:build testbed

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/netclass-dev/netclass/api/contract"
	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/test/e2e/harness"
	"github.com/netclass-dev/netclass/test/testbed"
)

// netclass-dra reports in each NodeNetwork of its node whether the node can
// carry the network, on every node: a node's own underlay address resolves to
// its underlay interface (whose name differs per node); a missing master or a
// foreign address is refused everywhere.
func TestNodeNetworkStatus(t *testing.T) {
	e := harness.Shared(t)
	for _, node := range e.Nodes {
		t.Run("local address of "+node.Name, func(t *testing.T) {
			cn := vxlanClusterNetwork(t, e, ncv1.VXLANOptions{Local: ncv1.IPAddress(node.IP)}, node.Name)
			waitNodeNetwork(t, e, cn, node.Name, metav1.ConditionTrue, ncv1.ReasonReady, func(s ncv1.NodeNetworkStatus) error {
				if string(s.LocalAddress) != node.IP || string(s.Master) != node.UnderlayIf || s.MTU == nil || *s.MTU <= 0 {
					return fmt.Errorf("status %+v: want the local address %s, its device %s and an MTU", s, node.IP, node.UnderlayIf)
				}
				return nil
			})
		})
	}
	for _, tc := range []struct {
		name   string
		opts   ncv1.VXLANOptions
		reason string
	}{
		{name: "missing master", opts: ncv1.VXLANOptions{Master: "nonexist" + ncv1.InterfaceName(harness.Unique(4))}, reason: ncv1.ReasonMasterNotFound},
		{name: "foreign local address", opts: ncv1.VXLANOptions{Local: "192.0.2.77"}, reason: ncv1.ReasonLocalAddressNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cn := vxlanClusterNetwork(t, e, tc.opts, "")
			for _, node := range e.Nodes {
				waitNodeNetwork(t, e, cn, node.Name, metav1.ConditionFalse, tc.reason, nil)
			}
		})
	}
}

// vxlanClusterNetwork creates a ClusterNetwork of type vxlan with the
// options, on one node (by its hostname label) or on all (node ""); it goes
// when the test ends.
func vxlanClusterNetwork(t *testing.T, e *harness.Env, opts ncv1.VXLANOptions, node string) string {
	t.Helper()
	name := "e2e-nn-" + harness.Unique(6)
	cn := &ncv1.ClusterNetwork{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: ncv1.ClusterNetworkSpec{Type: ncv1.NetworkTypeVXLAN, DefaultOptions: &ncv1.Options{VXLAN: &opts}}}
	if node != "" {
		cn.Spec.NodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{testbed.HostnameLabel: node}}
	}
	if _, err := e.NC.NetclassV1alpha1().ClusterNetworks().Create(testbed.Context(t, time.Minute), cn, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.NC.NetclassV1alpha1().ClusterNetworks().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

// waitNodeNetwork waits until the node's NodeNetwork of the ClusterNetwork has
// the Ready condition and check (when not nil) accepts its status.
func waitNodeNetwork(t *testing.T, e *harness.Env, cluster, node string, ready metav1.ConditionStatus, reason string, check func(ncv1.NodeNetworkStatus) error) {
	t.Helper()
	testbed.Poll(t, testbed.Context(t, 2*time.Minute), 200*time.Millisecond, "NodeNetwork of "+cluster+" on "+node, func(ctx context.Context) (bool, string, error) {
		list, err := e.NC.NetclassV1alpha1().NodeNetworks().List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			return false, err.Error(), nil
		}
		for _, nn := range list.Items {
			if nn.Spec.ClusterNetworkName != cluster {
				continue
			}
			c := meta.FindStatusCondition(nn.Status.Conditions, ncv1.ConditionReady)
			if c == nil || c.Status != ready || c.Reason != reason {
				return false, fmt.Sprintf("condition %+v", c), nil
			}
			if check != nil {
				if err := check(nn.Status); err != nil {
					return false, err.Error(), nil
				}
			}
			return true, "", nil
		}
		return false, "no NodeNetwork yet", nil
	})
}

// Interfaces are named net1, net2… in the order the pod lists its claims,
// around a name the AttachmentConfig sets.
func TestInterfaceNames(t *testing.T) {
	e := harness.Shared(t)
	class := e.Class(t, harness.PodNetworkKind)
	var nets [3]string
	for i := range nets {
		bridge := "e2e" + harness.Unique(6)
		nets[i] = "e2e-names-" + harness.Unique(6)
		e.PodNetwork(t, nets[i], harness.BridgeParams(bridge, harness.RandomSubnet()), nil, bridge)
	}
	ns := testbed.Namespace(t, e.Kube)
	for i, name := range []string{"green", "blue"} {
		e.WaitDevice(t, class, "", nets[i], true)
		e.ClaimTemplate(t, ns, name, class, "", nets[i], nil)
	}
	e.WaitDevice(t, class, "", nets[2], true)
	e.ClaimTemplate(t, ns, "data", class, "", nets[2], &contract.AttachmentConfig{InterfaceName: "net1"})
	e.RunPods(t, harness.Pod(ns, "multi", "blue", "data", "green"))
	e.Attached(t, ns, "multi", "data", "net1")
	e.Attached(t, ns, "multi", "blue", "net2")
	e.Attached(t, ns, "multi", "green", "net3")
}

// With shared devices off, each network is published as single-use slots:
// as many pods as slots attach, the next one is not scheduled. Node 1's
// daemon publishes the slots, and the pods are pinned to node 1: the other
// nodes' daemons still share their devices.
func TestSlotFallback(t *testing.T) {
	e := harness.Shared(t)
	e.DRA.RestartWith(t, "--no-shared-devices", "--fallback-slots=2")
	t.Cleanup(func() { e.DRA.RestartWith(t) })
	class := e.Class(t, harness.PodNetworkKind)
	bridge, pn := "e2e"+harness.Unique(6), "e2e-slots-"+harness.Unique(6)
	e.PodNetwork(t, pn, harness.BridgeParams(bridge, harness.RandomSubnet()), nil, bridge)
	ns := testbed.Namespace(t, e.Kube)
	testbed.Poll(t, testbed.Context(t, time.Minute), 100*time.Millisecond, "two slot devices", func(ctx context.Context) (bool, string, error) {
		devs, err := e.Devices(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		n := 0
		for _, d := range devs {
			if d.Attr(contract.AttributeStdNetworkClass) == class && d.Attr(contract.AttributeStdPodNetwork) == pn {
				if ptr.Deref(d.Device.AllowMultipleAllocations, false) {
					return false, "", fmt.Errorf("slot %s is shareable", d.Device.Name)
				}
				n++
			}
		}
		return n == 2, fmt.Sprintf("%d devices", n), nil
	})
	e.ClaimTemplate(t, ns, "net", class, "", pn, nil)
	e.RunPods(t, harness.PodOn(e.Node, ns, "one", "net"), harness.PodOn(e.Node, ns, "two", "net"))
	a, b := e.Attached(t, ns, "one", "net", "net1"), e.Attached(t, ns, "two", "net", "net1")
	if a.Device == b.Device {
		t.Fatalf("both pods got slot %s", a.Device)
	}
	e.CreatePod(t, harness.PodOn(e.Node, ns, "three", "net"))
	testbed.Poll(t, testbed.Context(t, time.Minute), 250*time.Millisecond, "the third pod unschedulable", func(ctx context.Context) (bool, string, error) {
		p, err := e.Kube.CoreV1().Pods(ns).Get(ctx, "three", metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("conditions %+v", p.Status.Conditions), nil
	})
}
