//go:build testbed

package controller_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/netclass-dev/netclass/api/contract"
	ncclient "github.com/netclass-dev/netclass/api/generated/clientset/versioned"
	multinetworkv1 "github.com/netclass-dev/netclass/api/multinetwork/v1"
	netclassv1alpha1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/controller/clusternetwork"
	"github.com/netclass-dev/netclass/controller/condition"
	"github.com/netclass-dev/netclass/controller/manager"
	"github.com/netclass-dev/netclass/controller/podnetwork"
	"github.com/netclass-dev/netclass/test/testbed"
)

// serviceAccount is the controller's identity in conf/deploy/10-controller-rbac.yaml.
const serviceAccount = "system:serviceaccount:netclass-system:netclass-controller"

// env is what every subtest shares: clients, the throwaway namespace, a unique suffix.
type env struct {
	kube   kubernetes.Interface
	nc     ncclient.Interface
	apply  *applier
	ctx    context.Context
	node   string
	ns     string
	suffix string
}

func (e *env) name(base string) string { return "nctest-" + base + "-" + e.suffix }

// TestController installs the CRDs and the controller's RBAC, runs netclass-controller
// in-process as its service account (leader-elected) and drives every reconciler.
func TestController(t *testing.T) {
	cfg := testbed.RestConfig(t)
	kube := testbed.Client(t)
	e := &env{kube: kube, ctx: testbed.Context(t, 10*time.Minute), suffix: fmt.Sprintf("%06x", rand.IntN(1<<24))}
	e.nc = ncclient.NewForConfigOrDie(cfg)
	e.apply = newApplier(t, cfg)
	if err := testbed.InstallCRDs(e.ctx, cfg); err != nil {
		t.Fatal(err)
	}
	e.apply.mapper.Reset() // the new kinds are served now
	e.apply.applyFile(t, e.ctx, "conf/deploy/00-namespace.yaml")
	e.apply.applyFile(t, e.ctx, "conf/deploy/10-controller-rbac.yaml")
	e.node = testbed.NodeName(t, kube)
	e.ns = testbed.Namespace(t, kube)
	identity := "testbed-" + e.suffix
	startController(t, cfg, identity)

	t.Run("LeaderLease", func(t *testing.T) { testLeaderLease(t, e, identity) })
	t.Run("SeedYAML", func(t *testing.T) { testSeedYAML(t, e) })
	t.Run("NetworkClass", func(t *testing.T) { testNetworkClass(t, e) })
	t.Run("PodNetworkLifecycle", func(t *testing.T) { testPodNetworkLifecycle(t, e) })
	t.Run("InUseHoldsDeletion", func(t *testing.T) { testInUse(t, e) })
	t.Run("SegmentSameSecond", func(t *testing.T) { testSegmentSameSecond(t, e) })
	t.Run("ClusterNetworkAndNetwork", func(t *testing.T) { testClusterNetwork(t, e, cfg) })
	t.Run("NetworkQoS", func(t *testing.T) { testNetworkQoS(t, e) })
	t.Run("GeneratedNAD", func(t *testing.T) { testGeneratedNAD(t, e) })
}

// startController runs the controller until the test ends, impersonating its service
// account so that only the RBAC of conf/deploy applies.
func startController(t *testing.T, cfg *rest.Config, identity string) {
	t.Helper()
	sa := rest.CopyConfig(cfg)
	sa.Impersonate = rest.ImpersonationConfig{
		UserName: serviceAccount,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:netclass-system", "system:authenticated"},
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- manager.Run(ctx, sa, manager.Options{
			LeaderElect: true, LeaseNamespace: "netclass-system", Identity: identity,
			NetworkClassRecheck: 2 * time.Second, NADRecheck: 2 * time.Second,
		})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("controller: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("the controller did not stop within 30 s")
		}
	})
}

// waitTimeout bounds each wait: the controller reacts within a second here.
const waitTimeout = time.Minute

func testLeaderLease(t *testing.T, e *env, identity string) {
	waitFor(t, e, "Lease netclass-system/netclass-controller held by "+identity, func(ctx context.Context) (string, error) {
		l, err := e.kube.CoordinationV1().Leases("netclass-system").Get(ctx, manager.DefaultLeaseName, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return "", err
		}
		return *l.Spec.HolderIdentity, nil
	}, func(h string) (bool, string) { return h == identity, "holder " + h })
}

// testSeedYAML applies the proposals' NetworkClass and PodNetworks verbatim: other providers'
// PodNetworks and the OVN-Kubernetes NetworkClass are left strictly alone.
func testSeedYAML(t *testing.T, e *env) {
	for _, f := range []string{"conf/crd/testdata/seed000-networkclass-ovn-kubernetes.yaml", "conf/crd/testdata/seed004-podnetwork-generic.yaml", "conf/crd/testdata/seed004-podnetwork-parameters.yaml"} {
		e.apply.applyFile(t, e.ctx, f)
	}
	// A netclass PodNetwork created after the seed's is Ready: by then the controller has
	// seen the seed's ones, and must not have touched them.
	mine := e.name("after-seed")
	e.createPodNetwork(t, mine, contract.Provider, bridgeParams("nctb-a"))
	waitReady(t, e, mine, metav1.ConditionTrue, "Ready")
	// The OVN class is another implementation's: no condition, no field of netclass's.
	// A class of netclass's created after it is judged, so the controller has seen it.
	waitNetworkClass(t, e, "multinetwork.networking.k8s.io", "v1", "PodNetwork", "Accepted")
	ovn, err := e.nc.MultinetworkV1().NetworkClasses().Get(e.ctx, "ovn-kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ovn.Status.Conditions) > 0 || managedBy(ovn.ManagedFields, contract.FieldManager) {
		t.Errorf("another implementation's NetworkClass was touched: %+v, managed fields %+v", ovn.Status.Conditions, ovn.ManagedFields)
	}
	for _, name := range []string{"net-dataplane", "dataplane"} {
		p, err := e.nc.MultinetworkV1().PodNetworks().Get(e.ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// Created with its status ignored, a PodNetwork has no conditions until a provider
		// writes some (the schema's default Ready=Unknown/Pending applies then).
		ready := condition.Get(p.Status.Conditions, "Ready")
		if len(p.Finalizers) > 0 || (ready != nil && ready.Reason != "Pending") || condition.Get(p.Status.Conditions, "InUse") != nil {
			t.Errorf("foreign PodNetwork %s was touched: finalizers %v, %s", name, p.Finalizers, describe(p.Status.Conditions, "Ready"))
		}
		if managedBy(p.ManagedFields, contract.FieldManager) {
			t.Errorf("foreign PodNetwork %s has fields managed by netclass.dev: %+v", name, p.ManagedFields)
		}
	}
}

func testNetworkClass(t *testing.T, e *env) {
	for _, tc := range []struct{ group, version, kind, reason string }{
		{"multinetwork.networking.k8s.io", "v1", "PodNetwork", "Accepted"},
		{"netclass.dev", "v1alpha1", "Network", "Accepted"},
		{"netclass.dev", "v1alpha1", "NetworkQoS", "Unsupported"},
		{"netclass.dev", "v1", "Network", "KindNotServed"},
	} {
		waitNetworkClass(t, e, tc.group, tc.version, tc.kind, tc.reason)
	}
}

// waitNetworkClass creates a NetworkClass of the Group/Version/Kind and waits for netclass's
// Accepted condition with reason.
func waitNetworkClass(t *testing.T, e *env, group, version, kind, reason string) {
	t.Helper()
	name := e.name(strings.ToLower(kind + "-" + reason))
	nc := &multinetworkv1.NetworkClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: multinetworkv1.NetworkClassSpec{Group: group, Version: version, Kind: kind}}
	if _, err := e.nc.MultinetworkV1().NetworkClasses().Create(e.ctx, nc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.nc.MultinetworkV1().NetworkClasses().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	want := metav1.ConditionFalse
	if reason == "Accepted" {
		want = metav1.ConditionTrue
	}
	waitFor(t, e, "NetworkClass "+name+" "+reason, func(ctx context.Context) (*multinetworkv1.NetworkClass, error) {
		return e.nc.MultinetworkV1().NetworkClasses().Get(ctx, name, metav1.GetOptions{})
	}, func(nc *multinetworkv1.NetworkClass) (bool, string) {
		return hasCondition(nc.Status.Conditions, "Accepted", want, reason, nc.Generation), describe(nc.Status.Conditions, "Accepted")
	})
}

// managedBy reports whether manager owns any field of the object.
func managedBy(fields []metav1.ManagedFieldsEntry, manager string) bool {
	return slices.ContainsFunc(fields, func(f metav1.ManagedFieldsEntry) bool { return f.Manager == manager })
}

func testPodNetworkLifecycle(t *testing.T, e *env) {
	name := e.name("blue")
	e.createPodNetwork(t, name, contract.Provider, bridgeParams("nctb-b"))
	p := waitReady(t, e, name, metav1.ConditionTrue, "Ready")
	if !slices.Contains(p.Finalizers, podnetwork.Finalizer) {
		t.Errorf("finalizers %v lack %s", p.Finalizers, podnetwork.Finalizer)
	}
	if !hasCondition(p.Status.Conditions, "InUse", metav1.ConditionFalse, "NotInUse", p.Generation) {
		t.Errorf("%s", describe(p.Status.Conditions, "InUse"))
	}
	waitEvent(t, e, "default", name, "Ready")

	e.patchPodNetwork(t, name, `{"spec":{"enabled":false}}`)
	waitReady(t, e, name, metav1.ConditionFalse, "AdministrativelyDisabled")
	waitEvent(t, e, "default", name, "AdministrativelyDisabled")
	e.patchPodNetwork(t, name, `{"spec":{"enabled":true}}`)
	waitReady(t, e, name, metav1.ConditionTrue, "Ready")

	e.patchPodNetwork(t, name, `{"spec":{"parameters":{"mtu":5,"bridge":"far-too-long-bridge"}}}`)
	p = waitReady(t, e, name, metav1.ConditionFalse, "InvalidParameters")
	msg := condition.Get(p.Status.Conditions, "Ready").Message
	for _, field := range []string{"mtu", "bridge"} {
		if !strings.Contains(msg, field) {
			t.Errorf("InvalidParameters message %q does not name %s", msg, field)
		}
	}
	ev := waitEvent(t, e, "default", name, "InvalidParameters")
	if ev.Type != corev1.EventTypeWarning || !strings.Contains(ev.Message, "mtu") {
		t.Errorf("event %s %q", ev.Type, ev.Message)
	}
	e.patchPodNetwork(t, name, `{"spec":{"parameters":{"mtu":1400,"bridge":"nctb-b"}}}`)
	waitReady(t, e, name, metav1.ConditionTrue, "Ready")
}

// testInUse plays netclass-dra: a claim allocated a netclass.dev device whose status data
// names the PodNetwork, next to a foreign driver's device whose data names another one.
func testInUse(t *testing.T, e *env) {
	used, other := e.name("used"), e.name("other")
	e.createPodNetwork(t, used, contract.Provider, bridgeParams("nctb-u"))
	e.createPodNetwork(t, other, contract.Provider, bridgeParams("nctb-o"))
	waitReady(t, e, used, metav1.ConditionTrue, "Ready")
	waitReady(t, e, other, metav1.ConditionTrue, "Ready")

	claims := e.kube.ResourceV1().ResourceClaims(e.ns)
	claim := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "attachment"},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{
			{Name: "net", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "netclass"}},
			{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "foreign"}},
		}}},
	}
	claim, err := claims.Create(e.ctx, claim, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	data := func(v map[string]string) *runtime.RawExtension {
		raw, _ := json.Marshal(v)
		return &runtime.RawExtension{Raw: raw}
	}
	claim.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
		{Request: "net", Driver: contract.DriverName, Pool: e.node, Device: "nctest-dev"},
		{Request: "gpu", Driver: "foreign.example.com", Pool: e.node, Device: "gpu-0"},
	}}}
	claim.Status.Devices = []resourceapi.AllocatedDeviceStatus{
		{Driver: contract.DriverName, Pool: e.node, Device: "nctest-dev", Data: data(map[string]string{"podNetwork": used, "networkClass": "netclass"})},
		{Driver: "foreign.example.com", Pool: e.node, Device: "gpu-0", Data: data(map[string]string{"podNetwork": other})},
	}
	if claim, err = claims.UpdateStatus(e.ctx, claim, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("write the claim's status as netclass-dra would: %v", err)
	}
	claimKey := e.ns + "/attachment"
	waitFor(t, e, "PodNetwork "+used+" InUse", e.podNetwork(t, used), func(p *multinetworkv1.PodNetwork) (bool, string) {
		c := condition.Get(p.Status.Conditions, "InUse")
		return c != nil && c.Status == metav1.ConditionTrue, describe(p.Status.Conditions, "InUse")
	})
	waitEvent(t, e, "default", used, "InUse")

	// Deletion waits for the claim.
	if err := e.nc.MultinetworkV1().PodNetworks().Delete(e.ctx, used, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, e, "PodNetwork "+used+" deletion blocked", e.podNetwork(t, used), func(p *multinetworkv1.PodNetwork) (bool, string) {
		c := condition.Get(p.Status.Conditions, "InUse")
		return p.DeletionTimestamp != nil && c != nil && strings.Contains(c.Message, "deletion waits") && strings.Contains(c.Message, claimKey), describe(p.Status.Conditions, "InUse")
	})
	waitEvent(t, e, "default", used, podnetwork.EventDeletionBlocked)
	// The foreign driver's entry does not make the other network used.
	if p, err := e.nc.MultinetworkV1().PodNetworks().Get(e.ctx, other, metav1.GetOptions{}); err != nil || condition.IsTrue(p.Status.Conditions, "InUse") {
		t.Errorf("PodNetwork %s in use through a foreign driver's device: %v %v", other, err, p.Status.Conditions)
	}
	// Still there while used: read it again after the controller surely reconciled.
	if p, err := e.nc.MultinetworkV1().PodNetworks().Get(e.ctx, used, metav1.GetOptions{}); err != nil || !slices.Contains(p.Finalizers, podnetwork.Finalizer) {
		t.Fatalf("PodNetwork %s lost its finalizer while in use: %v", used, err)
	}

	// netclass-dra's part ends: the claim is deallocated. The network goes.
	claim.Status = resourceapi.ResourceClaimStatus{}
	if _, err := claims.UpdateStatus(e.ctx, claim, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, e, "PodNetwork "+used+" deleted", func(ctx context.Context) (bool, error) {
		_, err := e.nc.MultinetworkV1().PodNetworks().Get(ctx, used, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	}, func(gone bool) (bool, string) { return gone, "still there" })
}

func testClusterNetwork(t *testing.T, e *env, rc *rest.Config) {
	cnName := e.name("cn")
	hostname := e.node
	if n, err := e.kube.CoreV1().Nodes().Get(e.ctx, e.node, metav1.GetOptions{}); err == nil && n.Labels["kubernetes.io/hostname"] != "" {
		hostname = n.Labels["kubernetes.io/hostname"]
	}
	cn := &netclassv1alpha1.ClusterNetwork{
		ObjectMeta: metav1.ObjectMeta{Name: cnName},
		Spec: netclassv1alpha1.ClusterNetworkSpec{
			Type:           netclassv1alpha1.NetworkTypeVXLAN,
			DefaultOptions: &netclassv1alpha1.Options{VXLAN: &netclassv1alpha1.VXLANOptions{Master: "eth0"}},
			NodeSelector:   &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/hostname": hostname}},
			IPAM:           &runtime.RawExtension{Raw: []byte(`{"type":"host-local","ranges":[[{"subnet":"10.99.2.0/24"}]]}`)},
		},
	}
	if _, err := e.nc.NetclassV1alpha1().ClusterNetworks().Create(e.ctx, cn, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.deleteAndWait(t, "ClusterNetwork "+cnName, func(ctx context.Context) (bool, error) {
			err := e.nc.NetclassV1alpha1().ClusterNetworks().Delete(ctx, cnName, metav1.DeleteOptions{})
			return apierrors.IsNotFound(err), client(err)
		})
	})
	nnName := clusternetwork.NodeNetworkName(cnName, e.node)
	getNN := func(ctx context.Context) (*netclassv1alpha1.NodeNetwork, error) {
		return e.nc.NetclassV1alpha1().NodeNetworks().Get(ctx, nnName, metav1.GetOptions{})
	}
	nn := waitFor(t, e, "NodeNetwork "+nnName+" NodeAgentMissing", getNN, func(nn *netclassv1alpha1.NodeNetwork) (bool, string) {
		return hasCondition(nn.Status.Conditions, "Ready", metav1.ConditionUnknown, "NodeAgentMissing", nn.Generation), describe(nn.Status.Conditions, "Ready")
	})
	if nn.Spec.NodeName != e.node || nn.Spec.ClusterNetworkName != cnName || len(nn.OwnerReferences) != 1 || nn.OwnerReferences[0].Name != cnName ||
		nn.Spec.Options.VXLAN == nil || nn.Spec.Options.VXLAN.Master != "eth0" {
		t.Errorf("NodeNetwork %s: %+v %+v", nnName, nn.ObjectMeta.OwnerReferences, nn.Spec)
	}
	getCN := func(ctx context.Context) (*netclassv1alpha1.ClusterNetwork, error) {
		return e.nc.NetclassV1alpha1().ClusterNetworks().Get(ctx, cnName, metav1.GetOptions{})
	}
	waitFor(t, e, "ClusterNetwork "+cnName+" Pending on 1 node", getCN, func(cn *netclassv1alpha1.ClusterNetwork) (bool, string) {
		return cn.Status.Nodes == 1 && cn.Status.ReadyNodes == 0 && hasCondition(cn.Status.Conditions, "Ready", metav1.ConditionUnknown, "Pending", cn.Generation),
			fmt.Sprintf("nodes %d ready %d %s", cn.Status.Nodes, cn.Status.ReadyNodes, describe(cn.Status.Conditions, "Ready"))
	})

	// A Network renders while the ClusterNetwork has no ready node, but is not Ready.
	netName := "blue"
	network := &netclassv1alpha1.Network{ObjectMeta: metav1.ObjectMeta{Name: netName, Namespace: e.ns},
		Spec: netclassv1alpha1.NetworkSpec{ClusterNetworkName: cnName, VNI: ptr(int32(4242)), MTU: ptr(int32(1400))}}
	if _, err := e.nc.NetclassV1alpha1().Networks(e.ns).Create(e.ctx, network, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	getNet := func(ctx context.Context) (*netclassv1alpha1.Network, error) {
		return e.nc.NetclassV1alpha1().Networks(e.ns).Get(ctx, netName, metav1.GetOptions{})
	}
	waitFor(t, e, "Network ClusterNetworkNotReady", getNet, func(n *netclassv1alpha1.Network) (bool, string) {
		return hasCondition(n.Status.Conditions, "Ready", metav1.ConditionFalse, "ClusterNetworkNotReady", n.Generation), describe(n.Status.Conditions, "Ready")
	})

	// netclass-dra reports the node Ready: the node is labelled, the Network is Ready.
	nn.Status = netclassv1alpha1.NodeNetworkStatus{
		Master: "eth0", LocalAddress: "10.250.0.1",
		Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready", Message: "test", ObservedGeneration: nn.Generation, LastTransitionTime: metav1.Now()}},
	}
	if _, err := e.nc.NetclassV1alpha1().NodeNetworks().UpdateStatus(e.ctx, nn, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, e, "ClusterNetwork Ready", getCN, func(cn *netclassv1alpha1.ClusterNetwork) (bool, string) {
		return cn.Status.ReadyNodes == 1 && hasCondition(cn.Status.Conditions, "Ready", metav1.ConditionTrue, "Ready", cn.Generation) && cn.Status.ObservedGeneration == cn.Generation,
			describe(cn.Status.Conditions, "Ready")
	})
	label := clusternetwork.NodeLabel(cnName)
	e.waitNodeLabel(t, label, true)
	n := waitFor(t, e, "Network Ready", getNet, func(n *netclassv1alpha1.Network) (bool, string) {
		return hasCondition(n.Status.Conditions, "Ready", metav1.ConditionTrue, "Ready", n.Generation), describe(n.Status.Conditions, "Ready")
	})
	var cfg map[string]any
	if n.Status.Config == nil || json.Unmarshal(n.Status.Config.Raw, &cfg) != nil {
		t.Fatalf("Network status.config %v", n.Status.Config)
	}
	if cfg["type"] != "netclass-vxlan" || cfg["vni"] != float64(4242) || cfg["master"] != "eth0" || cfg["mtu"] != float64(1400) || cfg["ipam"] == nil || n.Status.Type != "netclass-vxlan" {
		t.Errorf("rendered config %s", n.Status.Config.Raw)
	}
	testNetworkLetIn(t, e, cnName, getNet)
	testNetworkInUse(t, e, rc, netName, 4242)

	// The node stops matching: its NodeNetwork and label go.
	if _, err := e.nc.NetclassV1alpha1().ClusterNetworks().Patch(e.ctx, cnName, types.MergePatchType,
		[]byte(`{"spec":{"nodeSelector":{"matchLabels":{"kubernetes.io/hostname":"no-such-node"}}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, e, "NodeNetwork "+nnName+" deleted", func(ctx context.Context) (bool, error) {
		_, err := getNN(ctx)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	}, func(gone bool) (bool, string) { return gone, "still there" })
	e.waitNodeLabel(t, label, false)
	waitFor(t, e, "ClusterNetwork NoReadyNodes", getCN, func(cn *netclassv1alpha1.ClusterNetwork) (bool, string) {
		return cn.Status.Nodes == 0 && hasCondition(cn.Status.Conditions, "Ready", metav1.ConditionFalse, "NoReadyNodes", cn.Generation), describe(cn.Status.Conditions, "Ready")
	})
	waitEvent(t, e, "default", cnName, clusternetwork.EventNodeNetworkDeleted)
}

// testNetworkLetIn: a ClusterNetwork's namespaceSelector and segmentIds
// decide which Networks it lets in; labelling the namespace (no event of the
// Network itself) lets it in again.
func testNetworkLetIn(t *testing.T, e *env, cnName string, getNet func(context.Context) (*netclassv1alpha1.Network, error)) {
	label := "nctest-tenant-" + e.suffix
	patchCN := func(patch string) {
		t.Helper()
		if _, err := e.nc.NetclassV1alpha1().ClusterNetworks().Patch(e.ctx, cnName, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitNet := func(what, reason, msg string) {
		t.Helper()
		waitFor(t, e, "Network "+what, getNet, func(n *netclassv1alpha1.Network) (bool, string) {
			c := condition.Get(n.Status.Conditions, "Ready")
			return c != nil && c.Reason == reason && strings.Contains(c.Message, msg) && c.ObservedGeneration == n.Generation, describe(n.Status.Conditions, "Ready")
		})
	}
	patchCN(fmt.Sprintf(`{"spec":{"namespaceSelector":{"matchLabels":{%q:"true"}}}}`, label))
	waitNet("NotAllowed by the namespaceSelector", netclassv1alpha1.ReasonNotAllowed, "namespace "+e.ns+" is not selected by spec.namespaceSelector")
	if _, err := e.kube.CoreV1().Namespaces().Patch(e.ctx, e.ns, types.MergePatchType,
		[]byte(fmt.Sprintf(`{"metadata":{"labels":{%q:"true"}}}`, label)), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitNet("Ready once its namespace is labelled", "Ready", "VNI 4242")
	patchCN(`{"spec":{"segmentIds":[{"first":1,"last":4000}]}}`)
	waitNet("NotAllowed by segmentIds", netclassv1alpha1.ReasonNotAllowed, "vni 4242 is not in spec.segmentIds")
	patchCN(`{"spec":{"segmentIds":[{"first":4242,"last":4242}]}}`)
	waitNet("Ready in a range of one", "Ready", "VNI 4242")
	_, err := e.nc.NetclassV1alpha1().ClusterNetworks().Patch(e.ctx, cnName, types.MergePatchType,
		[]byte(`{"spec":{"segmentIds":[{"first":10,"last":9}]}}`), metav1.PatchOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "last must not be below first") {
		t.Errorf("a range whose last is below its first: %v, want refused by the schema", err)
	}
	patchCN(`{"spec":{"namespaceSelector":null,"segmentIds":null}}`)
	waitNet("Ready again", "Ready", "VNI 4242")
}

func testNetworkQoS(t *testing.T, e *env) {
	qoses := e.nc.NetclassV1alpha1().NetworkQoSes(e.ns)
	valid := &netclassv1alpha1.NetworkQoS{ObjectMeta: metav1.ObjectMeta{Name: "valid"}, Spec: netclassv1alpha1.NetworkQoSSpec{
		Priority: 10, Egress: []netclassv1alpha1.Rule{{DSCP: 46, Classifier: &netclassv1alpha1.Classifier{To: []netclassv1alpha1.Destination{
			{IPBlock: &netclassv1alpha1.IPBlock{CIDR: "10.0.0.0/8", Except: []netclassv1alpha1.CIDR{"10.1.0.0/16"}}}}}}},
	}}
	invalid := valid.DeepCopy()
	invalid.Name = "invalid"
	invalid.Spec.PodSelector = metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn}}}
	for _, q := range []*netclassv1alpha1.NetworkQoS{valid, invalid} {
		if _, err := qoses.Create(e.ctx, q, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ name, accepted, ready, msgHas string }{
		{"valid", "Accepted", "Pending", "selects"},
		{"invalid", "InvalidConfig", "InvalidConfig", "spec.podSelector"},
	} {
		waitFor(t, e, "NetworkQoS "+tc.name, func(ctx context.Context) (*netclassv1alpha1.NetworkQoS, error) {
			return qoses.Get(ctx, tc.name, metav1.GetOptions{})
		}, func(q *netclassv1alpha1.NetworkQoS) (bool, string) {
			acc := condition.Get(q.Status.Conditions, "Accepted")
			ready := condition.Get(q.Status.Conditions, "Ready")
			return acc != nil && acc.Reason == tc.accepted && strings.Contains(acc.Message, tc.msgHas) && ready != nil && ready.Reason == tc.ready,
				describe(q.Status.Conditions, "Accepted") + "; " + describe(q.Status.Conditions, "Ready")
		})
	}
	waitEvent(t, e, e.ns, "invalid", "InvalidConfig")
}
