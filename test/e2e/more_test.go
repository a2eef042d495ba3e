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

	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/shim/attachment"
	"github.com/netclass-dev/netclass/test/e2e/harness"
	"github.com/netclass-dev/netclass/test/testbed"
)

// netclass-dra reports in each NodeNetwork of its node whether the node can
// carry the network.
func TestNodeNetworkStatus(t *testing.T) {
	e := harness.Shared(t)
	ctx := testbed.Context(t, 2*time.Minute)
	for _, tc := range []struct {
		name   string
		opts   ncv1.VXLANOptions
		ready  metav1.ConditionStatus
		reason string
		check  func(ncv1.NodeNetworkStatus) error
	}{
		{name: "local address of the node", opts: ncv1.VXLANOptions{Local: harness.NodeIP}, ready: metav1.ConditionTrue, reason: ncv1.ReasonReady,
			check: func(s ncv1.NodeNetworkStatus) error {
				if s.LocalAddress != harness.NodeIP || s.Master == "" || s.MTU == nil || *s.MTU <= 0 {
					return fmt.Errorf("status %+v: want the local address, its device and an MTU", s)
				}
				return nil
			}},
		{name: "missing master", opts: ncv1.VXLANOptions{Master: "nonexist" + ncv1.InterfaceName(harness.Unique(4))},
			ready: metav1.ConditionFalse, reason: ncv1.ReasonMasterNotFound},
		{name: "foreign local address", opts: ncv1.VXLANOptions{Local: "192.0.2.77"},
			ready: metav1.ConditionFalse, reason: ncv1.ReasonLocalAddressNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := "e2e-nn-" + harness.Unique(6)
			cn := &ncv1.ClusterNetwork{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: ncv1.ClusterNetworkSpec{Type: ncv1.NetworkTypeVXLAN, DefaultOptions: &ncv1.Options{VXLAN: &tc.opts}}}
			if _, err := e.NC.NetclassV1alpha1().ClusterNetworks().Create(ctx, cn, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				e.NC.NetclassV1alpha1().ClusterNetworks().Delete(context.Background(), name, metav1.DeleteOptions{})
			})
			testbed.Poll(t, ctx, 200*time.Millisecond, "NodeNetwork of "+name+" on "+e.Node, func(ctx context.Context) (bool, string, error) {
				list, err := e.NC.NetclassV1alpha1().NodeNetworks().List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + e.Node})
				if err != nil {
					return false, err.Error(), nil
				}
				for _, nn := range list.Items {
					if nn.Spec.ClusterNetworkName != name {
						continue
					}
					c := meta.FindStatusCondition(nn.Status.Conditions, ncv1.ConditionReady)
					if c == nil || c.Status != tc.ready || c.Reason != tc.reason {
						return false, fmt.Sprintf("condition %+v", c), nil
					}
					if tc.check != nil {
						if err := tc.check(nn.Status); err != nil {
							return false, err.Error(), nil
						}
					}
					return true, "", nil
				}
				return false, "no NodeNetwork yet", nil
			})
		})
	}
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
	e.ClaimTemplate(t, ns, "data", class, "", nets[2], &attachment.Config{InterfaceName: "net1"})
	e.RunPods(t, harness.Pod(ns, "multi", "blue", "data", "green"))
	e.Attached(t, ns, "multi", "data", "net1")
	e.Attached(t, ns, "multi", "blue", "net2")
	e.Attached(t, ns, "multi", "green", "net3")
}

// With shared devices off, each network is published as single-use slots:
// as many pods as slots attach, the next one is not scheduled.
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
			if d.Attr(attachment.AttributeStdNetworkClass) == class && d.Attr(attachment.AttributeStdPodNetwork) == pn {
				if ptr.Deref(d.Device.AllowMultipleAllocations, false) {
					return false, "", fmt.Errorf("slot %s is shareable", d.Device.Name)
				}
				n++
			}
		}
		return n == 2, fmt.Sprintf("%d devices", n), nil
	})
	e.ClaimTemplate(t, ns, "net", class, "", pn, nil)
	e.RunPods(t, harness.Pod(ns, "one", "net"), harness.Pod(ns, "two", "net"))
	a, b := e.Attached(t, ns, "one", "net", "net1"), e.Attached(t, ns, "two", "net", "net1")
	if a.Device == b.Device {
		t.Fatalf("both pods got slot %s", a.Device)
	}
	e.CreatePod(t, harness.Pod(ns, "three", "net"))
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
