package network

import (
	"encoding/json"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	mnv1 "github.com/netclass-dev/netclass/api/multinetwork/v1"
	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/conf/bandwidth"
	"github.com/netclass-dev/netclass/conf/netspec"
)

const bridgeParams = `{"type":"netclass-bridge","bridge":"blue0","ipam":{"type":"host-local","ranges":[[{"subnet":"10.10.1.0/24"}]]}}`

func ready(gen int64) []metav1.Condition {
	return []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready", ObservedGeneration: gen}}
}

func podNetwork(name, params string, mutate ...func(*mnv1.PodNetwork)) *mnv1.PodNetwork {
	pn := &mnv1.PodNetwork{
		ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1, Labels: map[string]string{"color": name}},
		Spec:       mnv1.PodNetworkSpec{Enabled: true, Provider: "netclass.dev", Parameters: runtime.RawExtension{Raw: []byte(params)}},
		Status:     mnv1.PodNetworkStatus{Conditions: ready(1)},
	}
	for _, m := range mutate {
		m(pn)
	}
	return pn
}

func TestFromPodNetwork(t *testing.T) {
	for _, tc := range []struct {
		name   string
		pn     *mnv1.PodNetwork
		reason string // "" = offered
	}{
		{name: "ready bridge", pn: podNetwork("blue", bridgeParams)},
		{name: "condition without observedGeneration", pn: podNetwork("blue", bridgeParams, func(p *mnv1.PodNetwork) {
			p.Status.Conditions = ready(0)
		})},
		{name: "other provider", pn: podNetwork("blue", bridgeParams, func(p *mnv1.PodNetwork) { p.Spec.Provider = "example.net/x" }),
			reason: ReasonOtherProvider},
		{name: "disabled", pn: podNetwork("blue", bridgeParams, func(p *mnv1.PodNetwork) { p.Spec.Enabled = false }),
			reason: ReasonDisabled},
		{name: "no condition", pn: podNetwork("blue", bridgeParams, func(p *mnv1.PodNetwork) { p.Status.Conditions = nil }),
			reason: ReasonNotReady},
		{name: "ready false", pn: podNetwork("blue", bridgeParams, func(p *mnv1.PodNetwork) {
			p.Status.Conditions[0].Status = metav1.ConditionFalse
		}), reason: ReasonNotReady},
		{name: "ready for an older generation", pn: podNetwork("blue", bridgeParams, func(p *mnv1.PodNetwork) { p.Generation = 2 }),
			reason: ReasonStaleReady},
		{name: "invalid parameters", pn: podNetwork("blue", `{"type":"netclass-bridge","mtu":5}`), reason: ReasonInvalidConfig},
		{name: "not a main plugin", pn: podNetwork("blue", `{"type":"netclass-qos"}`), reason: ReasonInvalidConfig},
		{name: "no parameters", pn: podNetwork("blue", ``), reason: ReasonInvalidConfig},
		{name: "name too long for an attribute", pn: podNetwork(strings.Repeat("a", 65), bridgeParams), reason: ReasonNameTooLong},
		{name: "invalid bandwidth annotation", pn: podNetwork("blue", bridgeParams, func(p *mnv1.PodNetwork) {
			p.Annotations = map[string]string{ncv1.AnnotationBandwidth: `{"capacity":"100M","step":"0"}`}
		}), reason: ReasonInvalidConfig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, skip := FromPodNetwork("netclass", tc.pn, &netspec.Node{Index: 0})
			if tc.reason != "" {
				if skip == nil || skip.Reason != tc.reason {
					t.Fatalf("skip = %v, want reason %s", skip, tc.reason)
				}
				return
			}
			if skip != nil {
				t.Fatalf("not offered: %v", skip)
			}
			if n.Type != "netclass-bridge" || n.Ref.Name != "blue" || n.Ref.Class != "netclass" || n.Ref.Kind != "PodNetwork" {
				t.Fatalf("network = %+v", n)
			}
			var conf map[string]any
			if err := json.Unmarshal(n.Config, &conf); err != nil {
				t.Fatal(err)
			}
			if conf["name"] != "blue" || conf["cniVersion"] != "1.1.0" || conf["bridge"] != "blue0" {
				t.Fatalf("config = %s", n.Config)
			}
		})
	}
}

func network(ns, name, cluster string, config string) *ncv1.Network {
	vni := int32(100)
	n := &ncv1.Network{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Generation: 1},
		Spec:       ncv1.NetworkSpec{ClusterNetworkName: cluster, VNI: &vni},
		Status:     ncv1.NetworkStatus{Conditions: ready(1)},
	}
	if config != "" {
		n.Status.Config = &runtime.RawExtension{Raw: []byte(config)}
	}
	return n
}

func clusterNetwork(name string) *ncv1.ClusterNetwork {
	return &ncv1.ClusterNetwork{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: ncv1.ClusterNetworkSpec{Type: ncv1.NetworkTypeVXLAN,
			DefaultOptions: &ncv1.Options{VXLAN: &ncv1.VXLANOptions{Local: "10.250.0.1"}},
			IPAM:           &runtime.RawExtension{Raw: []byte(`{"type":"host-local","ranges":[[{"subnet":"10.20.0.0/24"}]]}`)}},
	}
}

func nodeNetwork(cluster string, status metav1.ConditionStatus) *ncv1.NodeNetwork {
	return &ncv1.NodeNetwork{
		ObjectMeta: metav1.ObjectMeta{Name: cluster + ".node"},
		Spec: ncv1.NodeNetworkSpec{ClusterNetworkName: cluster, NodeName: "node",
			Options: ncv1.Options{VXLAN: &ncv1.VXLANOptions{Local: "10.250.0.1", Remotes: []ncv1.IPAddress{"10.250.0.2"}}}},
		Status: ncv1.NodeNetworkStatus{Conditions: []metav1.Condition{{Type: "Ready", Status: status, Reason: "x"}}},
	}
}

// vxlanConfig is what the controller publishes for network("…", "overlay") under clusterNetwork("overlay").
const vxlanConfig = `{"type":"netclass-vxlan","vni":100,"local":"10.250.0.1","ipam":{"type":"host-local","ranges":[[{"subnet":"10.20.0.0/24"}]]}}`

func TestFromNetwork(t *testing.T) {
	n, skip := FromNetwork("nets", network("tenant-a", "red", "overlay", vxlanConfig), clusterNetwork("overlay"), nodeNetwork("overlay", metav1.ConditionTrue), 0, nil)
	if skip != nil {
		t.Fatalf("not offered: %v", skip)
	}
	if n.VNI != 100 || n.ClusterNetwork != "overlay" || n.Ref.Namespace != "tenant-a" || n.Type != "netclass-vxlan" || n.StatusIgnored != "" {
		t.Fatalf("network = %+v", n)
	}
	if !strings.Contains(string(n.Config), `"name":"tenant-a_red"`) || !strings.Contains(string(n.Config), `"remotes":["10.250.0.2"]`) {
		t.Fatalf("config not named after namespace and name, or without the node's remotes: %s", n.Config)
	}
	badIPAM := network("a", "red", "overlay", "")
	badIPAM.Spec.IPAM = &runtime.RawExtension{Raw: []byte(`{"type":"host-local","dataDir":"/etc/kubernetes"}`)}
	for _, tc := range []struct {
		name   string
		n      *ncv1.Network
		cn     *ncv1.ClusterNetwork
		nn     *ncv1.NodeNetwork
		reason string
	}{
		{"no cluster network", network("a", "red", "overlay", vxlanConfig), nil, nodeNetwork("overlay", metav1.ConditionTrue), ReasonNoClusterNetwork},
		{"no node network", network("a", "red", "overlay", vxlanConfig), clusterNetwork("overlay"), nil, ReasonNodeNetworkAbsent},
		{"node network not ready", network("a", "red", "overlay", vxlanConfig), clusterNetwork("overlay"), nodeNetwork("overlay", metav1.ConditionFalse), ReasonNodeNotReady},
		{"tenant ipam naming a directory", badIPAM, clusterNetwork("overlay"), nodeNetwork("overlay", metav1.ConditionTrue), ReasonInvalidConfig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, skip := FromNetwork("nets", tc.n, tc.cn, tc.nn, 0, nil)
			if skip == nil || skip.Reason != tc.reason {
				t.Fatalf("skip = %v, want %s", skip, tc.reason)
			}
		})
	}
}

// TestBandwidth: a PodNetwork's annotation and a Network's bandwidth over
// its ClusterNetwork's become the descriptor's policy; none is nil.
func TestBandwidth(t *testing.T) {
	annotated := podNetwork("blue", bridgeParams, func(p *mnv1.PodNetwork) {
		p.Annotations = map[string]string{ncv1.AnnotationBandwidth: `{"capacity":"100M","default":"30M","step":"10M"}`}
	})
	cn := clusterNetwork("overlay")
	capacity, def := resource.MustParse("1G"), resource.MustParse("50M")
	cn.Spec.Bandwidth = &ncv1.NetworkBandwidth{Capacity: &capacity, Default: &def}
	lowered := network("a", "red", "overlay", "")
	own := resource.MustParse("200M")
	lowered.Spec.Bandwidth = &ncv1.NetworkBandwidth{Capacity: &own}
	raised := network("a", "red", "overlay", "")
	more := resource.MustParse("2G")
	raised.Spec.Bandwidth = &ncv1.NetworkBandwidth{Capacity: &more}
	nn := nodeNetwork("overlay", metav1.ConditionTrue)
	for _, tc := range []struct {
		name string
		of   func() (Network, *Skip)
		want *bandwidth.Policy
		skip string
	}{
		{"podnetwork without", func() (Network, *Skip) { return FromPodNetwork("c", podNetwork("blue", bridgeParams), &netspec.Node{}) }, nil, ""},
		{"podnetwork annotation", func() (Network, *Skip) { return FromPodNetwork("c", annotated, &netspec.Node{}) },
			&bandwidth.Policy{Capacity: 100e6, Default: 30e6, Max: 100e6, Step: 10e6}, ""},
		{"network inherits", func() (Network, *Skip) { return FromNetwork("c", network("a", "red", "overlay", ""), cn, nn, 0, nil) },
			&bandwidth.Policy{Capacity: 1e9, Default: 50e6, Max: 1e9}, ""},
		{"network lowers", func() (Network, *Skip) { return FromNetwork("c", lowered, cn, nn, 0, nil) },
			&bandwidth.Policy{Capacity: 200e6, Default: 50e6, Max: 200e6}, ""},
		{"network raises", func() (Network, *Skip) { return FromNetwork("c", raised, cn, nn, 0, nil) }, nil, ReasonInvalidConfig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, skip := tc.of()
			switch {
			case tc.skip != "":
				if skip == nil || skip.Reason != tc.skip {
					t.Fatalf("skip = %v, want %s", skip, tc.skip)
				}
			case skip != nil:
				t.Fatalf("not offered: %v", skip)
			case (n.Bandwidth == nil) != (tc.want == nil) || n.Bandwidth != nil && *n.Bandwidth != *tc.want:
				t.Fatalf("bandwidth = %+v, want %+v", n.Bandwidth, tc.want)
			}
		})
	}
}

// TestForgedStatusConfigIsNotRun: a VXLAN Network whose status names
// netclass-bridge on cni0 (a tenant allowed to write status, or a stale
// controller) is run as the specs say, and the node says why it ignored it.
func TestForgedStatusConfigIsNotRun(t *testing.T) {
	forged := network("tenant-a", "red", "overlay", `{"type":"netclass-bridge","bridge":"cni0","ipam":{"type":"host-local","dataDir":"/etc","ranges":[[{"subnet":"10.250.0.0/24"}]]}}`)
	n, skip := FromNetwork("nets", forged, clusterNetwork("overlay"), nodeNetwork("overlay", metav1.ConditionTrue), 0, nil)
	if skip != nil {
		t.Fatalf("not offered: %v", skip)
	}
	if n.Type != "netclass-vxlan" || strings.Contains(string(n.Config), "cni0") || strings.Contains(string(n.Config), "dataDir") {
		t.Fatalf("the node runs the forged status: %s", n.Config)
	}
	if !strings.Contains(n.StatusIgnored, "status.config differs") {
		t.Errorf("StatusIgnored = %q", n.StatusIgnored)
	}
}

type fakeObjects struct {
	classes  []*mnv1.NetworkClass
	pns      []*mnv1.PodNetwork
	nets     []*ncv1.Network
	cns      []*ncv1.ClusterNetwork
	nodeNets []*ncv1.NodeNetwork
	nodes    []*corev1.Node
	// namespaces' labels; a namespace not listed is unknown
	namespaces map[string]map[string]string
}

func (f fakeObjects) Nodes() ([]*corev1.Node, error) { return f.nodes, nil }

func (f fakeObjects) NamespaceLabels() netspec.NamespaceLabels {
	return func(name string) (map[string]string, bool) { l, ok := f.namespaces[name]; return l, ok }
}

func (f fakeObjects) NetworkClasses() ([]*mnv1.NetworkClass, error) { return f.classes, nil }
func (f fakeObjects) PodNetworks() ([]*mnv1.PodNetwork, error)      { return f.pns, nil }
func (f fakeObjects) Networks() ([]*ncv1.Network, error)            { return f.nets, nil }
func (f fakeObjects) NodeNetworks() ([]*ncv1.NodeNetwork, error)    { return f.nodeNets, nil }
func (f fakeObjects) ClusterNetworks() ([]*ncv1.ClusterNetwork, error) {
	return f.cns, nil
}

type links map[string]bool

func (l links) HasLink(name string) bool { return l[name] }

// LinkWithAddress: in these tests the underlay device "ul0" holds 10.252.0.1.
func (l links) LinkWithAddress(a netip.Addr) (string, bool) {
	if a == netip.MustParseAddr("10.252.0.1") && l["ul0"] {
		return "ul0", true
	}
	return "", false
}

func node(name, ip, index string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if ip != "" {
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name}, {Type: corev1.NodeInternalIP, Address: ip}}
	}
	if index != "" {
		n.Annotations = map[string]string{ncv1.AnnotationNodeIndex: index}
	}
	return n
}

func class(name, group, version, kind string) *mnv1.NetworkClass {
	return &mnv1.NetworkClass{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: mnv1.NetworkClassSpec{Group: group, Version: version, Kind: kind}}
}

func TestCollect(t *testing.T) {
	objs := fakeObjects{
		classes: []*mnv1.NetworkClass{
			class("netclass", "multinetwork.networking.k8s.io", "v1", "PodNetwork"),
			class("also-podnetworks", "multinetwork.networking.k8s.io", "v1", "PodNetwork"),
			class("nets", "netclass.dev", "v1alpha1", "Network"),
			class("ovn", "k8s.ovn.org", "v1", "UserDefinedNetwork"),
		},
		pns: []*mnv1.PodNetwork{
			podNetwork("blue", bridgeParams),
			podNetwork("green", `{"type":"netclass-vxlan","vni":7,"master":"eth9"}`),
			podNetwork("foreign", bridgeParams, func(p *mnv1.PodNetwork) { p.Spec.Provider = "example.net/x" }),
			podNetwork("off", bridgeParams, func(p *mnv1.PodNetwork) { p.Spec.Enabled = false }),
		},
		nets:     []*ncv1.Network{network("tenant-a", "red", "overlay", vxlanConfig)},
		cns:      []*ncv1.ClusterNetwork{clusterNetwork("overlay")},
		nodeNets: []*ncv1.NodeNetwork{nodeNetwork("overlay", metav1.ConditionTrue)},
		nodes:    []*corev1.Node{node("node", "10.252.0.1", "0")},
	}
	nets, skips, err := Collect(objs, links{"eth0": true}, "node")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range nets {
		got = append(got, n.Ref.Class+":"+n.Ref.String())
	}
	want := "also-podnetworks:PodNetwork blue,netclass:PodNetwork blue,nets:Network tenant-a/red"
	if strings.Join(got, ",") != want {
		t.Fatalf("offered %v, want %s", got, want)
	}
	reasons := map[string]string{}
	for _, s := range skips {
		reasons[s.Ref.Class+":"+s.Ref.Name] = s.Reason
	}
	for key, reason := range map[string]string{
		"netclass:green": ReasonMasterNotFound, "netclass:off": ReasonDisabled,
		"also-podnetworks:green": ReasonMasterNotFound,
	} {
		if reasons[key] != reason {
			t.Errorf("skip %s = %q, want %q (all: %v)", key, reasons[key], reason, reasons)
		}
	}
	if _, ok := reasons["netclass:foreign"]; ok {
		t.Errorf("another provider's PodNetwork is reported: %v", reasons)
	}
	nets, _, _ = Collect(objs, links{"eth9": true}, "node")
	if len(nets) != 5 {
		t.Fatalf("with eth9 present %d networks are offered, want 5", len(nets))
	}
}

// TestCollectSegmentOwner: whatever their status says, two network objects on
// one segment are never both offered; the older one is.
func TestCollectSegmentOwner(t *testing.T) {
	old := func(p *mnv1.PodNetwork) { p.CreationTimestamp = metav1.NewTime(time.Unix(10, 0)) }
	young := func(p *mnv1.PodNetwork) { p.CreationTimestamp = metav1.NewTime(time.Unix(20, 0)) }
	red := network("tenant-a", "red", "overlay", vxlanConfig) // VNI 100
	red.CreationTimestamp = metav1.NewTime(time.Unix(15, 0))
	objs := fakeObjects{
		classes: []*mnv1.NetworkClass{
			class("netclass", "multinetwork.networking.k8s.io", "v1", "PodNetwork"),
			class("nets", "netclass.dev", "v1alpha1", "Network"),
		},
		pns: []*mnv1.PodNetwork{
			podNetwork("blue", bridgeParams, old),
			podNetwork("blue-again", bridgeParams, young),
			podNetwork("green", `{"type":"netclass-vxlan","vni":100,"master":"eth9"}`, young),
		},
		nets:     []*ncv1.Network{red},
		cns:      []*ncv1.ClusterNetwork{clusterNetwork("overlay")},
		nodeNets: []*ncv1.NodeNetwork{nodeNetwork("overlay", metav1.ConditionTrue)},
		nodes:    []*corev1.Node{node("node", "10.252.0.1", "0")},
	}
	nets, skips, err := Collect(objs, links{"eth9": true}, "node")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range nets {
		got = append(got, n.Ref.String())
	}
	if want := "PodNetwork blue,Network tenant-a/red"; strings.Join(got, ",") != want {
		t.Fatalf("offered %v, want %s", got, want)
	}
	reasons := map[string]string{}
	for _, s := range skips {
		reasons[s.Ref.Name] = s.Reason + ": " + s.Message
	}
	for name, want := range map[string]string{
		"blue-again": "SegmentConflict: bridge blue0 is already used by PodNetwork blue",
		"green":      "SegmentConflict: VNI 100 is already used by Network tenant-a/red",
	} {
		if !strings.HasPrefix(reasons[name], want) {
			t.Errorf("%s: %q, want %q", name, reasons[name], want)
		}
	}
}

// A node offers only the Networks their ClusterNetwork lets in (its
// namespaceSelector over the namespace's labels, its segmentIds), whatever
// their status says, and one it does not let in holds no segment: an older
// Network of a namespace not selected keeps no permitted one off its VNI.
func TestCollectNotAllowed(t *testing.T) {
	cn := clusterNetwork("overlay")
	cn.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "paid"}}
	cn.Spec.SegmentIDs = []ncv1.IDRange{{First: 100, Last: 100}}
	squatter := network("free", "squat", "overlay", "") // VNI 100, Ready
	squatter.CreationTimestamp = metav1.NewTime(time.Unix(10, 0))
	red := network("paid", "red", "overlay", "")
	red.CreationTimestamp = metav1.NewTime(time.Unix(20, 0))
	far := network("paid", "far", "overlay", "")
	vni101 := int32(101)
	far.Spec.VNI = &vni101
	objs := fakeObjects{
		classes:    []*mnv1.NetworkClass{class("nets", "netclass.dev", "v1alpha1", "Network")},
		nets:       []*ncv1.Network{squatter, red, far},
		cns:        []*ncv1.ClusterNetwork{cn},
		nodeNets:   []*ncv1.NodeNetwork{nodeNetwork("overlay", metav1.ConditionTrue)},
		nodes:      []*corev1.Node{node("node", "10.252.0.1", "0")},
		namespaces: map[string]map[string]string{"free": {"tier": "free"}, "paid": {"tier": "paid"}},
	}
	nets, skips, err := Collect(objs, links{}, "node")
	if err != nil {
		t.Fatal(err)
	}
	if len(nets) != 1 || nets[0].Ref.String() != "Network paid/red" {
		t.Fatalf("offered %v, want Network paid/red alone (skipped: %v)", nets, skips)
	}
	reasons := map[string]string{}
	for _, s := range skips {
		reasons[s.Ref.Namespace+"/"+s.Ref.Name] = s.Reason + ": " + s.Message
	}
	for name, want := range map[string]string{
		"free/squat": "NotAllowed: namespace free is not selected by spec.namespaceSelector of ClusterNetwork overlay",
		"paid/far":   "NotAllowed: vni 101 is not in spec.segmentIds of ClusterNetwork overlay",
	} {
		if reasons[name] != want {
			t.Errorf("%s: %q, want %q", name, reasons[name], want)
		}
	}
}

// TestCollectOnNodes: what each node runs of a network spanning nodes is its
// own: the PodNetwork left to the nodes gets this node's underlay and the
// other nodes' InternalIPs as remotes; every host-local range is cut to this
// node's block, so two nodes never hand out one address; a node whose index
// is not assigned yet offers none of them.
func TestCollectOnNodes(t *testing.T) {
	const auto = `{"type":"netclass-vxlan","vni":300,"ipam":{"type":"host-local","ranges":[[{"subnet":"10.40.0.0/24"}]]}}`
	objs := fakeObjects{
		classes: []*mnv1.NetworkClass{
			class("netclass", "multinetwork.networking.k8s.io", "v1", "PodNetwork"),
			class("nets", "netclass.dev", "v1alpha1", "Network"),
		},
		pns:      []*mnv1.PodNetwork{podNetwork("auto", auto), podNetwork("blue", bridgeParams)},
		nets:     []*ncv1.Network{network("tenant-a", "red", "overlay", "")},
		cns:      []*ncv1.ClusterNetwork{clusterNetwork("overlay")},
		nodeNets: []*ncv1.NodeNetwork{nodeNetwork("overlay", metav1.ConditionTrue)},
		nodes: []*corev1.Node{node("node", "10.252.0.1", "2"), node("other", "10.252.0.2", "0"),
			node("third", "10.252.0.3", "1"), node("no-address", "", "3")},
	}
	nets, skips, err := Collect(objs, links{"ul0": true}, "node")
	if err != nil {
		t.Fatal(err)
	}
	configs := map[string]string{}
	for _, n := range nets {
		configs[n.Ref.Name] = string(n.Config)
	}
	for name, want := range map[string][]string{
		"auto": {`"master":"ul0"`, `"local":"10.252.0.1"`, `"remotes":["10.252.0.2","10.252.0.3"]`, `"rangeEnd":"10.40.0.47","rangeStart":"10.40.0.32"`},
		"red":  {`"local":"10.250.0.1"`, `"remotes":["10.250.0.2"]`, `"rangeEnd":"10.20.0.47","rangeStart":"10.20.0.32"`},
		"blue": {`"ranges":[[{"subnet":"10.10.1.0/24"}]]`}, // a bridge is node-local: the whole range
	} {
		for _, w := range want {
			if !strings.Contains(configs[name], w) {
				t.Errorf("%s: config %s lacks %s (skips: %v)", name, configs[name], w, skips)
			}
		}
	}
	objs.nodes[0] = node("node", "10.252.0.1", "")
	nets, skips, _ = Collect(objs, links{"ul0": true}, "node")
	if len(nets) != 1 || nets[0].Ref.Name != "blue" {
		t.Fatalf("without a node index, offered %v (want blue only; skips %v)", nets, skips)
	}
	for _, s := range skips {
		if !strings.Contains(s.Message, "node index") {
			t.Errorf("skip %v does not say the node index is missing", s)
		}
	}
}

// A network object being deleted is not offered, but keeps its segment until it is gone:
// a younger Network of another namespace on its VNI is not offered either.
func TestCollectDeleting(t *testing.T) {
	gone := metav1.NewTime(time.Unix(30, 0))
	red := network("tenant-a", "red", "overlay", "") // VNI 100, Ready
	red.CreationTimestamp, red.DeletionTimestamp = metav1.NewTime(time.Unix(10, 0)), &gone
	late := network("tenant-b", "late", "overlay", "")
	late.CreationTimestamp = metav1.NewTime(time.Unix(20, 0))
	objs := fakeObjects{
		classes: []*mnv1.NetworkClass{
			class("netclass", "multinetwork.networking.k8s.io", "v1", "PodNetwork"),
			class("nets", "netclass.dev", "v1alpha1", "Network"),
		},
		pns:      []*mnv1.PodNetwork{podNetwork("blue", bridgeParams, func(p *mnv1.PodNetwork) { p.DeletionTimestamp = &gone })},
		nets:     []*ncv1.Network{red, late},
		cns:      []*ncv1.ClusterNetwork{clusterNetwork("overlay")},
		nodeNets: []*ncv1.NodeNetwork{nodeNetwork("overlay", metav1.ConditionTrue)},
		nodes:    []*corev1.Node{node("node", "10.252.0.1", "0")},
	}
	nets, skips, err := Collect(objs, links{}, "node")
	if err != nil {
		t.Fatal(err)
	}
	if len(nets) != 0 {
		t.Fatalf("offered %v", nets)
	}
	reasons := map[string]string{}
	for _, s := range skips {
		reasons[s.Ref.Name] = s.Reason + ": " + s.Message
	}
	for name, want := range map[string]string{
		"blue": "Deleting: ",
		"red":  "Deleting: ",
		"late": "SegmentConflict: VNI 100 is already used by a Network of another namespace",
	} {
		if !strings.HasPrefix(reasons[name], want) {
			t.Errorf("%s: %q, want %q", name, reasons[name], want)
		}
	}
}
