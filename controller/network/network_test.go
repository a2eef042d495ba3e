package network_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/netclass-dev/netclass/api/contract"
	multinetworkv1 "github.com/netclass-dev/netclass/api/multinetwork/v1"
	netclassv1alpha1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/conf/netspec"
	"github.com/netclass-dev/netclass/controller/condition"
	"github.com/netclass-dev/netclass/controller/internal/harness"
	"github.com/netclass-dev/netclass/controller/network"
)

func i32(v int32) *int32 { return &v }
func i64(v int64) *int64 { return &v }

func raw(s string) *runtime.RawExtension { return &runtime.RawExtension{Raw: []byte(s)} }

var readyCond = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready"}}

func vlanCN() *netclassv1alpha1.ClusterNetwork {
	return &netclassv1alpha1.ClusterNetwork{
		ObjectMeta: metav1.ObjectMeta{Name: "trunk"},
		Spec: netclassv1alpha1.ClusterNetworkSpec{
			Type:           netclassv1alpha1.NetworkTypeVLAN,
			DefaultOptions: &netclassv1alpha1.Options{VLAN: &netclassv1alpha1.VLANOptions{Master: "eth1", MTU: i32(1500)}},
			IPAM:           raw(`{"type":"dhcp"}`),
			QoS:            &netclassv1alpha1.InterfaceQoS{EgressRate: i64(1000000), EgressBurst: i64(10000), DSCP: i32(10)},
		},
		Status: netclassv1alpha1.ClusterNetworkStatus{Conditions: readyCond},
	}
}

func vxlanCN() *netclassv1alpha1.ClusterNetwork {
	return &netclassv1alpha1.ClusterNetwork{
		ObjectMeta: metav1.ObjectMeta{Name: "overlay"},
		Spec: netclassv1alpha1.ClusterNetworkSpec{
			Type:           netclassv1alpha1.NetworkTypeVXLAN,
			DefaultOptions: &netclassv1alpha1.Options{VXLAN: &netclassv1alpha1.VXLANOptions{Remotes: []netclassv1alpha1.IPAddress{"192.0.2.12", "192.0.2.11"}, Port: i32(4789)}},
		},
		Status: netclassv1alpha1.ClusterNetworkStatus{Conditions: readyCond},
	}
}

func net(name, cn string, vlan, vni *int32) *netclassv1alpha1.Network {
	return &netclassv1alpha1.Network{
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: name, UID: k8stypes.UID("uid-tenant-" + name), Generation: 2, CreationTimestamp: metav1.NewTime(time.Unix(1000, 0))},
		Spec:       netclassv1alpha1.NetworkSpec{ClusterNetworkName: cn, VLANID: vlan, VNI: vni},
	}
}

func vxlanCN2() *netclassv1alpha1.ClusterNetwork {
	cn := vxlanCN()
	cn.Name = "overlay2"
	return cn
}

func withIPAM(n *netclassv1alpha1.Network, ipam string) *netclassv1alpha1.Network {
	n.Spec.IPAM = raw(ipam)
	return n
}

func TestEvaluate(t *testing.T) {
	older := net("first", "trunk", i32(100), nil)
	older.CreationTimestamp = metav1.NewTime(time.Unix(10, 0))
	olderVXLAN := net("first", "overlay", nil, i32(5001))
	olderVXLAN.CreationTimestamp = metav1.NewTime(time.Unix(10, 0))
	olderPN := &multinetworkv1.PodNetwork{
		ObjectMeta: metav1.ObjectMeta{Name: "pn-5001", CreationTimestamp: metav1.NewTime(time.Unix(10, 0))},
		Spec: multinetworkv1.PodNetworkSpec{Enabled: true, Provider: "netclass.dev",
			Parameters: runtime.RawExtension{Raw: []byte(`{"type":"netclass-vxlan","vni":5001,"master":"eth1"}`)}},
	}
	badMTU := vlanCN()
	badMTU.Spec.DefaultOptions.VLAN.MTU = i32(10)
	notReady := vlanCN()
	notReady.Status.Conditions = nil
	for _, tc := range []struct {
		name   string
		net    *netclassv1alpha1.Network
		cn     *netclassv1alpha1.ClusterNetwork
		others []*netclassv1alpha1.Network
		pns    []*multinetworkv1.PodNetwork
		status metav1.ConditionStatus
		reason string
		msgHas string
		config bool
		held   string // the SegmentHeld condition's status, "none" for none, "" unchecked
	}{
		{name: "ready", net: net("red", "trunk", i32(100), nil), cn: vlanCN(), status: metav1.ConditionTrue, reason: "Ready", msgHas: "VLAN ID 100", config: true, held: "True"},
		{name: "no cluster network", net: net("red", "nope", i32(100), nil), status: metav1.ConditionFalse, reason: "ClusterNetworkNotFound", msgHas: "nope", held: "none"},
		{name: "a name no node can offer", net: net(strings.Repeat("r", 65), "trunk", i32(100), nil), cn: vlanCN(), status: metav1.ConditionFalse, reason: "NameTooLong", msgHas: "at most 64", held: "True"},
		{name: "vni on vlan", net: net("red", "trunk", nil, i32(7)), cn: vlanCN(), status: metav1.ConditionFalse, reason: "TypeMismatch", msgHas: "spec.vlanId", held: "none"},
		{name: "vlanId on vxlan", net: net("red", "overlay", i32(7), nil), cn: vxlanCN(), status: metav1.ConditionFalse, reason: "TypeMismatch", msgHas: "spec.vni"},
		{name: "segment taken", net: net("red", "trunk", i32(100), nil), cn: vlanCN(), others: []*netclassv1alpha1.Network{older}, status: metav1.ConditionFalse, reason: "SegmentConflict", msgHas: "tenant/first", held: "False"},
		{name: "segment taken under another cluster network", net: net("blue", "overlay2", nil, i32(5001)), cn: vxlanCN2(),
			others: []*netclassv1alpha1.Network{olderVXLAN}, status: metav1.ConditionFalse, reason: "SegmentConflict", msgHas: "VNI 5001 is already used by Network tenant/first"},
		{name: "segment taken by a podnetwork", net: net("blue", "overlay", nil, i32(5001)), cn: vxlanCN(),
			pns: []*multinetworkv1.PodNetwork{olderPN}, status: metav1.ConditionFalse, reason: "SegmentConflict", msgHas: "PodNetwork pn-5001"},
		{name: "tenant ipam dataDir refused", net: withIPAM(net("red", "trunk", i32(100), nil), `{"type":"dhcp","daemonSocketPath":"/tmp/x"}`), cn: vlanCN(),
			status: metav1.ConditionFalse, reason: "InvalidConfig", msgHas: "spec.ipam.daemonSocketPath"},
		{name: "older one keeps it", net: older, cn: vlanCN(), others: []*netclassv1alpha1.Network{net("red", "trunk", i32(100), nil)}, status: metav1.ConditionTrue, reason: "Ready", config: true, held: "True"},
		{name: "invalid config", net: net("red", "trunk", i32(100), nil), cn: badMTU, status: metav1.ConditionFalse, reason: "InvalidConfig", msgHas: "mtu", held: "True"},
		{name: "cluster network not ready", net: net("red", "trunk", i32(100), nil), cn: notReady, status: metav1.ConditionFalse, reason: "ClusterNetworkNotReady", config: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			all := append(append([]*netclassv1alpha1.Network{}, tc.others...), tc.net)
			cns := []*netclassv1alpha1.ClusterNetwork{vlanCN(), vxlanCN(), vxlanCN2()}
			o := network.Evaluate(tc.net, tc.cn, netspec.Holders(tc.pns, all, cns, nil), nil)
			if o.Ready.Status != tc.status || o.Ready.Reason != tc.reason || !strings.Contains(o.Ready.Message, tc.msgHas) {
				t.Errorf("got %s/%s %q, want %s/%s containing %q", o.Ready.Status, o.Ready.Reason, o.Ready.Message, tc.status, tc.reason, tc.msgHas)
			}
			if (o.Config != nil) != tc.config {
				t.Errorf("config %v, want one: %v", o.Config, tc.config)
			}
			if got := heldStatus(o.Held); tc.held != "" && got != tc.held {
				t.Errorf("SegmentHeld %s, want %s", got, tc.held)
			}
		})
	}
}

// A ClusterNetwork lets in only the namespaces its namespaceSelector selects
// and the IDs its segmentIds list; a Network it does not let in is not Ready
// and holds no segment, so it cannot keep a permitted one off its ID.
func TestEvaluateNotAllowed(t *testing.T) {
	cn := vlanCN()
	cn.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "paid"}}
	cn.Spec.SegmentIDs = []netclassv1alpha1.IDRange{{First: 100, Last: 199}, {First: 300, Last: 300}}
	labels := map[string]map[string]string{"tenant": {"tier": "free"}, "paid": {"tier": "paid"}}
	ns := func(name string) (map[string]string, bool) { l, ok := labels[name]; return l, ok }
	in := func(namespace string, n *netclassv1alpha1.Network) *netclassv1alpha1.Network {
		n.Namespace = namespace
		return n
	}
	squatter := net("first", "trunk", i32(150), nil) // namespace tenant, created before
	squatter.CreationTimestamp = metav1.NewTime(time.Unix(10, 0))
	for _, tc := range []struct {
		name   string
		net    *netclassv1alpha1.Network
		reason string
		msgHas string
		held   string
	}{
		{"namespace not selected", net("red", "trunk", i32(150), nil), "NotAllowed", "namespace tenant is not selected by spec.namespaceSelector of ClusterNetwork trunk", "none"},
		{"namespace unknown", in("gone", net("red", "trunk", i32(150), nil)), "NotAllowed", "namespace gone", "none"},
		{"id outside the ranges", in("paid", net("red", "trunk", i32(200), nil)), "NotAllowed", "vlanId 200 is not in spec.segmentIds of ClusterNetwork trunk", "none"},
		{"id in a range of one", in("paid", net("red", "trunk", i32(300), nil)), "Ready", "VLAN ID 300", "True"},
		{"a Network not let in holds nothing", in("paid", net("red", "trunk", i32(150), nil)), "Ready", "VLAN ID 150", "True"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			all := []*netclassv1alpha1.Network{squatter, tc.net}
			o := network.Evaluate(tc.net, cn, netspec.Holders(nil, all, []*netclassv1alpha1.ClusterNetwork{cn}, ns), ns)
			if o.Ready.Reason != tc.reason || !strings.Contains(o.Ready.Message, tc.msgHas) {
				t.Errorf("got %s %q, want %s containing %q", o.Ready.Reason, o.Ready.Message, tc.reason, tc.msgHas)
			}
			if got := heldStatus(o.Held); got != tc.held {
				t.Errorf("SegmentHeld %s, want %s", got, tc.held)
			}
		})
	}
}

func heldStatus(c *metav1.Condition) string {
	if c == nil {
		return "none"
	}
	return string(c.Status)
}

func TestSameConfig(t *testing.T) {
	if !network.SameConfig(raw(`{"a":1,"b":[1,2]}`), raw(`{ "b":[1,2], "a":1.0 }`)) {
		t.Error("equal JSON compared unequal")
	}
	if network.SameConfig(raw(`{"a":1}`), nil) || !network.SameConfig(nil, &runtime.RawExtension{}) {
		t.Error("nil handling")
	}
}

func TestReconcile(t *testing.T) {
	env := harness.New(t, nil, []runtime.Object{vlanCN(), net("red", "trunk", i32(100), nil)})
	c, err := network.New(env.NC, env.NCInf, env.KubeInf, env.Recorder)
	if err != nil {
		t.Fatal(err)
	}
	env.Start(t, c.HasSynced)
	if _, err := c.Reconcile(env.Ctx, "tenant/red"); err != nil {
		t.Fatal(err)
	}
	got, err := env.NC.NetclassV1alpha1().Networks("tenant").Get(env.Ctx, "red", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.Type != netclassv1alpha1.NetworkTypeVLAN || got.Status.ObservedGeneration != 2 || got.Status.Config == nil ||
		!strings.Contains(string(got.Status.Config.Raw), `"vlanId":100`) || !condition.IsTrue(got.Status.Conditions, "Ready") ||
		!condition.IsTrue(got.Status.Conditions, netclassv1alpha1.ConditionSegmentHeld) {
		t.Errorf("status %+v (config %s)", got.Status, got.Status.Config)
	}
	if inUse := condition.Get(got.Status.Conditions, netclassv1alpha1.ConditionInUse); inUse == nil || inUse.Reason != netclassv1alpha1.ReasonNotInUse ||
		!slices.Equal(got.Finalizers, []string{contract.FinalizerInUse}) {
		t.Errorf("a new network: InUse %+v, finalizers %v", inUse, got.Finalizers)
	}
	if ev := env.Events(); len(ev) != 1 || !strings.HasPrefix(ev[0], "Normal Ready") {
		t.Errorf("events %v", ev)
	}
	if _, err := c.Reconcile(env.Ctx, "tenant/gone"); err != nil {
		t.Errorf("missing network: %v", err)
	}
}
