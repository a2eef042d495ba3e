package harness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/netclass-dev/netclass/api/contract"
	mnv1 "github.com/netclass-dev/netclass/api/multinetwork/v1"
	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/test/testbed"
	"github.com/netclass-dev/netclass/test/testbed/bed"
)

// WaitTimeout bounds every wait of the harness.
const WaitTimeout = 2 * time.Minute

// Unique returns n random hex characters for names.
func Unique(n int) string {
	b := make([]byte, (n+1)/2)
	rand.Read(b)
	return hex.EncodeToString(b)[:n]
}

// CEL is the guarded DeviceClass selector of a NetworkClass (notes/k8s-testbed.md).
func CEL(class string) string {
	return fmt.Sprintf(`device.driver == %q && device.attributes["resource.kubernetes.io"].?networkClass.orValue("") == %q`, contract.DriverName, class)
}

// Class creates a NetworkClass for the kind and a DeviceClass of the same
// name selecting its devices, both deleted when the test ends.
func (e *Env) Class(t testing.TB, gvk mnv1.NetworkClassSpec) string {
	t.Helper()
	ctx := testbed.Context(t, time.Minute)
	name := "e2e-" + strings.ToLower(gvk.Kind) + "-" + Unique(6)
	nc := &mnv1.NetworkClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: gvk}
	if _, err := e.NC.MultinetworkV1().NetworkClasses().Create(ctx, nc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create NetworkClass %s: %v", name, err)
	}
	t.Cleanup(func() { e.deleteQuietly(t, "NetworkClass", name, e.NC.MultinetworkV1().NetworkClasses().Delete) })
	dc := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: CEL(name)}}}}}
	if _, err := e.Kube.ResourceV1().DeviceClasses().Create(ctx, dc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create DeviceClass %s: %v", name, err)
	}
	t.Cleanup(func() { e.deleteQuietly(t, "DeviceClass", name, e.Kube.ResourceV1().DeviceClasses().Delete) })
	return name
}

// PodNetworkKind and NetworkKind are the NetworkClass specs of netclass's kinds.
var (
	PodNetworkKind = mnv1.NetworkClassSpec{Group: mnv1.GroupName, Version: "v1", Kind: "PodNetwork"}
	NetworkKind    = mnv1.NetworkClassSpec{Group: ncv1.GroupName, Version: "v1alpha1", Kind: "Network"}
)

func (e *Env) deleteQuietly(t testing.TB, kind, name string, del func(context.Context, string, metav1.DeleteOptions) error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := del(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("delete %s %s: %v", kind, name, err)
	}
}

// BridgeParams are netclass-bridge parameters on a bridge with host-local IPAM.
func BridgeParams(bridge, subnet string) map[string]any {
	return map[string]any{"type": "netclass-bridge", "bridge": bridge,
		"ipam": map[string]any{"type": "host-local", "ranges": []any{[]any{map[string]any{"subnet": subnet}}}}}
}

// RandomSubnet is a /24 in 10.200.0.0–10.239.255.0 (outside the test bed's).
func RandomSubnet() string {
	b := make([]byte, 2)
	rand.Read(b)
	return fmt.Sprintf("10.%d.%d.0/24", 200+int(b[0])%40, b[1])
}

// PodNetwork creates a PodNetwork of provider netclass.dev; when the test
// ends it is deleted (and waited for: the controller's finalizer holds it
// while claims use it) and the host devices named in links are removed.
// Create network objects before the test's namespace, so that their
// cleanup runs after the namespace (and its pods) are gone.
func (e *Env) PodNetwork(t testing.TB, name string, params map[string]any, labels map[string]string, links ...string) {
	t.Helper()
	ctx := testbed.Context(t, time.Minute)
	raw, err := json.Marshal(params)
	if err != nil {
		t.Fatal(err)
	}
	pn := &mnv1.PodNetwork{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: mnv1.PodNetworkSpec{Enabled: true, Provider: contract.DriverName, Parameters: runtime.RawExtension{Raw: raw}}}
	if _, err := e.NC.MultinetworkV1().PodNetworks().Create(ctx, pn, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create PodNetwork %s: %v", name, err)
	}
	e.ForgetNetwork(name, 0)
	t.Cleanup(func() {
		e.deleteAndWait(t, "PodNetwork "+name, func(ctx context.Context) error {
			return e.NC.MultinetworkV1().PodNetworks().Delete(ctx, name, metav1.DeleteOptions{})
		}, func(ctx context.Context) error {
			_, err := e.NC.MultinetworkV1().PodNetworks().Get(ctx, name, metav1.GetOptions{})
			return err
		})
		DeleteLinks(t, links...)
	})
}

func (e *Env) deleteAndWait(t testing.TB, what string, del, get func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), WaitTimeout)
	defer cancel()
	if err := del(ctx); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("delete %s: %v", what, err)
		return
	}
	for {
		if err := get(ctx); apierrors.IsNotFound(err) {
			return
		}
		select {
		case <-ctx.Done():
			t.Errorf("%s still there after %v", what, WaitTimeout)
			return
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// DeleteLinks removes host devices a test's networks created (bridges,
// VXLAN devices) on every node of the test bed, if they are still there.
// netclass-dra removes a network's unused devices itself, at any moment, so
// a device that is gone by the time `ip link del` runs is not an error: ip
// says "Cannot find device" when it is gone before ip looks up its name, and
// "No such device" when it goes between that lookup and the deletion.
func DeleteLinks(t testing.TB, names ...string) {
	b, err := bed.Load(bed.StateDir())
	if err != nil {
		t.Errorf("delete links %v: %v", names, err)
		return
	}
	for _, node := range b.Nodes {
		for _, n := range names {
			out, err := node.Command("ip", "link", "del", n).CombinedOutput()
			if err != nil && !gone(string(out)) {
				t.Errorf("delete link %s of node %s: %v: %s", n, node.Name, err, out)
			}
		}
	}
}

func gone(ipOutput string) bool {
	return strings.Contains(ipOutput, "Cannot find device") || strings.Contains(ipOutput, "No such device")
}

// WaitPodNetworkCondition waits until the PodNetwork's condition has the status.
func (e *Env) WaitPodNetworkCondition(t testing.TB, name, condType string, status metav1.ConditionStatus) *mnv1.PodNetwork {
	t.Helper()
	var pn *mnv1.PodNetwork
	testbed.Poll(t, testbed.Context(t, WaitTimeout), 200*time.Millisecond, fmt.Sprintf("PodNetwork %s %s=%s", name, condType, status),
		func(ctx context.Context) (bool, string, error) {
			got, err := e.NC.MultinetworkV1().PodNetworks().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			pn = got
			c := meta.FindStatusCondition(got.Status.Conditions, condType)
			if c == nil {
				return false, "no condition", nil
			}
			return c.Status == status, fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message), nil
		})
	return pn
}

// VXLANCluster creates a ClusterNetwork of type netclass-vxlan whose VTEP is
// node 1's address (so only node 1 offers its Networks: the others do not
// have that address); it goes when the test ends, with the host devices of
// vni. Create it before the test's namespace, so that its cleanup runs after
// the namespace's pods are gone.
func (e *Env) VXLANCluster(t testing.TB, vni int32) string {
	t.Helper()
	ctx := testbed.Context(t, time.Minute)
	cluster := "e2e-vxlan-" + Unique(6)
	cn := &ncv1.ClusterNetwork{ObjectMeta: metav1.ObjectMeta{Name: cluster},
		Spec: ncv1.ClusterNetworkSpec{Type: ncv1.NetworkTypeVXLAN,
			DefaultOptions: &ncv1.Options{VXLAN: &ncv1.VXLANOptions{Local: ncv1.IPAddress(NodeIP)}},
			IPAM:           &runtime.RawExtension{Raw: []byte(`{"type":"host-local"}`)}}}
	if _, err := e.NC.NetclassV1alpha1().ClusterNetworks().Create(ctx, cn, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create ClusterNetwork %s: %v", cluster, err)
	}
	t.Cleanup(func() {
		e.deleteAndWait(t, "ClusterNetwork "+cluster, func(ctx context.Context) error {
			return e.NC.NetclassV1alpha1().ClusterNetworks().Delete(ctx, cluster, metav1.DeleteOptions{})
		}, func(ctx context.Context) error {
			_, err := e.NC.NetclassV1alpha1().ClusterNetworks().Get(ctx, cluster, metav1.GetOptions{})
			return err
		})
		DeleteLinks(t, fmt.Sprintf("ncbr%d", vni), fmt.Sprintf("ncvx%d", vni))
	})
	return cluster
}

// Network creates a Network with the VNI (or VLAN ID, if vlan) under a
// ClusterNetwork, in a namespace; the namespace's deletion removes it.
func (e *Env) Network(t testing.TB, namespace, name, cluster string, vni int32, subnet string) {
	t.Helper()
	ipam, _ := json.Marshal(map[string]any{"type": "host-local", "ranges": []any{[]any{map[string]any{"subnet": subnet}}}})
	n := &ncv1.Network{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: ncv1.NetworkSpec{ClusterNetworkName: cluster, VNI: ptr.To(vni), IPAM: &runtime.RawExtension{Raw: ipam}}}
	if _, err := e.NC.NetclassV1alpha1().Networks(namespace).Create(testbed.Context(t, time.Minute), n, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Network %s/%s: %v", namespace, name, err)
	}
	e.ForgetNetwork(namespace+"_"+name, vni)
}

// NodeIP is node 1's address (scripts/testbed/README.md), its InternalIP on
// its underlay interface; the other nodes' are in Env.Nodes.
const NodeIP = "10.250.0.1"

// RandomVNI is a VNI unlikely to be used by anyone else on the node.
func RandomVNI() int32 {
	b := make([]byte, 3)
	rand.Read(b)
	return 7_000_000 + int32(b[0])<<12 | int32(b[1])<<4 | int32(b[2]&0xf)
}

// Request is one request of a claim on a network.
func Request(name, deviceClass, namespace, network string, cfg *contract.AttachmentConfig) (resourceapi.DeviceRequest, []resourceapi.DeviceClaimConfiguration) {
	sel := fmt.Sprintf(`device.attributes["resource.kubernetes.io"].podNetwork == %q`, network)
	if namespace != "" {
		sel += fmt.Sprintf(` && device.attributes["resource.kubernetes.io"].?podNetworkNamespace.orValue("") == %q`, namespace)
	}
	req := resourceapi.DeviceRequest{Name: name, Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: deviceClass,
		Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: sel}}}}}
	if cfg == nil {
		return req, nil
	}
	cfg.APIVersion, cfg.Kind = contract.AttachmentConfigAPIVersion, contract.AttachmentConfigKind
	raw, _ := json.Marshal(cfg)
	return req, []resourceapi.DeviceClaimConfiguration{{Requests: []string{name},
		DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
			Driver: contract.DriverName, Parameters: runtime.RawExtension{Raw: raw}}}}}
}

// BridgeNet is where most attachment tests start: a netclass-bridge
// PodNetwork in a NetworkClass (and DeviceClass) of its own, published on
// every node, and a throwaway namespace with a ResourceClaimTemplate on it.
// A bridge is node-local: pods that talk over it run on one node (PodOn).
type BridgeNet struct {
	Class, Bridge, PodNetwork, Namespace string
}

// BridgeNet creates a BridgeNet whose PodNetwork is named prefix-<random>
// and whose claim template is named template; all of it goes when the
// test ends.
func (e *Env) BridgeNet(t testing.TB, prefix, template string) BridgeNet {
	t.Helper()
	n := BridgeNet{Class: e.Class(t, PodNetworkKind), Bridge: "e2e" + Unique(6), PodNetwork: prefix + "-" + Unique(6)}
	e.PodNetwork(t, n.PodNetwork, BridgeParams(n.Bridge, RandomSubnet()), nil, n.Bridge)
	n.Namespace = testbed.Namespace(t, e.Kube)
	for _, node := range e.Nodes {
		e.WaitDeviceOn(t, node.Name, n.Class, "", n.PodNetwork, true)
	}
	e.ClaimTemplate(t, n.Namespace, template, n.Class, "", n.PodNetwork, nil)
	return n
}

// ClaimTemplate creates a ResourceClaimTemplate with one request on a network.
func (e *Env) ClaimTemplate(t testing.TB, ns, name, deviceClass, netNamespace, network string, cfg *contract.AttachmentConfig) {
	t.Helper()
	req, conf := Request("net", deviceClass, netNamespace, network, cfg)
	tmpl := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{
			Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{req}, Config: conf}}}}
	if _, err := e.Kube.ResourceV1().ResourceClaimTemplates(ns).Create(testbed.Context(t, time.Minute), tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create ResourceClaimTemplate %s/%s: %v", ns, name, err)
	}
}

// Pod is a sleeping busybox pod with a claim from each template.
func Pod(ns, name string, templates ...string) *corev1.Pod {
	p := testbed.Pod(ns, name, "sleep", "3600")
	for _, tmpl := range templates {
		p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: tmpl, ResourceClaimTemplateName: ptr.To(tmpl)})
	}
	return p
}

// PodOn is Pod pinned to a node (testbed.OnNode): for pods that must share a
// node-local network (a bridge, a host-local range) or whose host state a
// test reads.
func PodOn(node, ns, name string, templates ...string) *corev1.Pod {
	return testbed.OnNode(Pod(ns, name, templates...), node)
}

// CreatePod creates a pod.
func (e *Env) CreatePod(t testing.TB, p *corev1.Pod) {
	t.Helper()
	if _, err := e.Kube.CoreV1().Pods(p.Namespace).Create(testbed.Context(t, time.Minute), p, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod %s/%s: %v", p.Namespace, p.Name, err)
	}
}

// PodTimeout bounds how long a pod takes to run.
const PodTimeout = 2 * time.Minute

// RunPods creates the pods, then waits until each runs.
func (e *Env) RunPods(t testing.TB, pods ...*corev1.Pod) {
	t.Helper()
	for _, p := range pods {
		e.CreatePod(t, p)
	}
	for _, p := range pods {
		testbed.WaitForPodRunning(t, e.Kube, p.Namespace, p.Name, PodTimeout)
	}
}

// RunPodsInTurn is RunPods for pods whose claims consume one device's
// capacity: each is created once the one before is bound to its node.
// kube-scheduler v1.37.1 counts a claim's consumed capacity twice for a
// moment at the end of its pod's binding (its allocation is in the claim
// cache and still in flight: GatherAllocatedState adds both); a pod
// scheduled in that moment onto a device filled near its capacity is found
// unschedulable, and no later event (another claim's allocation) requeues
// it: it waits for the scheduler's 5-minute retry. Scheduling such pods one
// by one keeps a test to what it is about (README: "An upstream scheduler
// race near capacity").
func (e *Env) RunPodsInTurn(t testing.TB, pods ...*corev1.Pod) {
	t.Helper()
	for _, p := range pods {
		e.CreatePod(t, p)
		testbed.Poll(t, testbed.Context(t, PodTimeout), 100*time.Millisecond, fmt.Sprintf("pod %s/%s bound to a node", p.Namespace, p.Name),
			func(ctx context.Context) (bool, string, error) {
				got, err := e.Kube.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
				if err != nil {
					return false, "", err
				}
				return got.Spec.NodeName != "", testbed.PodSummary(got), nil
			})
	}
	for _, p := range pods {
		testbed.WaitForPodRunning(t, e.Kube, p.Namespace, p.Name, PodTimeout)
	}
}

// ClaimOfPod returns the claim generated for one of the pod's claims.
func (e *Env) ClaimOfPod(t testing.TB, ns, pod, podClaim string) *resourceapi.ResourceClaim {
	t.Helper()
	var claim *resourceapi.ResourceClaim
	testbed.Poll(t, testbed.Context(t, WaitTimeout), 200*time.Millisecond, fmt.Sprintf("claim %s of pod %s/%s", podClaim, ns, pod),
		func(ctx context.Context) (bool, string, error) {
			p, err := e.Kube.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			for _, s := range p.Status.ResourceClaimStatuses {
				if s.Name == podClaim && s.ResourceClaimName != nil {
					c, err := e.Kube.ResourceV1().ResourceClaims(ns).Get(ctx, *s.ResourceClaimName, metav1.GetOptions{})
					if err != nil {
						return false, err.Error(), nil
					}
					claim = c
					return true, "", nil
				}
			}
			return false, "claim not generated yet", nil
		})
	return claim
}

// WaitClaimStatus waits until the claim has a netclass.dev device status entry ok accepts.
func (e *Env) WaitClaimStatus(t testing.TB, ns, claim string, ok func(resourceapi.AllocatedDeviceStatus) bool) (*resourceapi.ResourceClaim, resourceapi.AllocatedDeviceStatus) {
	t.Helper()
	var got *resourceapi.ResourceClaim
	var entry resourceapi.AllocatedDeviceStatus
	testbed.Poll(t, testbed.Context(t, WaitTimeout), 200*time.Millisecond, fmt.Sprintf("status of claim %s/%s", ns, claim),
		func(ctx context.Context) (bool, string, error) {
			c, err := e.Kube.ResourceV1().ResourceClaims(ns).Get(ctx, claim, metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			got = c
			for _, d := range c.Status.Devices {
				if d.Driver == contract.DriverName && ok(d) {
					entry = d
					return true, "", nil
				}
			}
			raw, _ := json.Marshal(c.Status.Devices)
			return false, string(raw), nil
		})
	return got, entry
}

// ReadyCondition returns the entry's Ready condition, if any.
func ReadyCondition(d resourceapi.AllocatedDeviceStatus) *metav1.Condition {
	return meta.FindStatusCondition(d.Conditions, "Ready")
}
