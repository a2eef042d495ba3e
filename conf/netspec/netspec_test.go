package netspec_test

import (
	"encoding/json"
	"net/netip"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	mnv1 "github.com/netclass-dev/netclass/api/multinetwork/v1"
	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/conf/netspec"
)

func i32(v int32) *int32 { return &v }
func i64(v int64) *int64 { return &v }

func raw(s string) *runtime.RawExtension { return &runtime.RawExtension{Raw: []byte(s)} }

func vlanCN(ipam string) *ncv1.ClusterNetwork {
	return &ncv1.ClusterNetwork{
		ObjectMeta: metav1.ObjectMeta{Name: "trunk"},
		Spec: ncv1.ClusterNetworkSpec{
			Type:           ncv1.NetworkTypeVLAN,
			DefaultOptions: &ncv1.Options{VLAN: &ncv1.VLANOptions{Master: "eth1", MTU: i32(1500)}},
			IPAM:           raw(ipam),
			QoS:            &ncv1.InterfaceQoS{EgressRate: i64(1000000), EgressBurst: i64(10000), DSCP: i32(10)},
		},
	}
}

func vxlanCN() *ncv1.ClusterNetwork {
	return &ncv1.ClusterNetwork{
		ObjectMeta: metav1.ObjectMeta{Name: "overlay"},
		Spec: ncv1.ClusterNetworkSpec{
			Type:           ncv1.NetworkTypeVXLAN,
			DefaultOptions: &ncv1.Options{VXLAN: &ncv1.VXLANOptions{Remotes: []ncv1.IPAddress{"192.0.2.12", "192.0.2.11"}, Port: i32(4789)}},
			IPAM:           raw(`{"type":"host-local","ranges":[[{"subnet":"10.30.0.0/16"}]]}`),
		},
	}
}

func network(name, cn string, vlan, vni *int32) *ncv1.Network {
	return &ncv1.Network{
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: name, CreationTimestamp: metav1.NewTime(time.Unix(1000, 0))},
		Spec:       ncv1.NetworkSpec{ClusterNetworkName: cn, VLANID: vlan, VNI: vni},
	}
}

func TestNetwork(t *testing.T) {
	red := network("red", "trunk", i32(100), nil)
	red.Spec.QoS = &ncv1.InterfaceQoS{DSCP: i32(46)}
	red.Spec.MTU = i32(1400)
	blue := network("blue", "overlay", nil, i32(5001))
	blue.Spec.IPAM = raw(`{"type":"host-local","ranges":[[{"subnet":"10.30.0.0/24"}]]}`)
	nodeOpts := &ncv1.Options{VXLAN: &ncv1.VXLANOptions{Remotes: []ncv1.IPAddress{"192.0.2.21"}}}
	node := &netspec.Node{Master: "ens5", Local: netip.MustParseAddr("192.0.2.20"), Index: 2}
	noMaster := vlanCN(`{"type":"dhcp"}`)
	noMaster.Spec.DefaultOptions = nil
	for _, tc := range []struct {
		name string
		net  *ncv1.Network
		cn   *ncv1.ClusterNetwork
		opts *ncv1.Options
		node *netspec.Node
		want string
	}{
		{"vlan", red, vlanCN(`{"type":"dhcp"}`), nil, nil,
			`{"type":"netclass-vlan","vlanId":100,"master":"eth1","mtu":1400,"ipam":{"type":"dhcp"},"qos":{"egressRate":1000000,"egressBurst":10000,"dscp":46}}`},
		{"vlan without master on a node: the node's underlay device", red, noMaster, nil, node,
			`{"type":"netclass-vlan","vlanId":100,"master":"ens5","mtu":1400,"ipam":{"type":"dhcp"},"qos":{"egressRate":1000000,"egressBurst":10000,"dscp":46}}`},
		{"vxlan without a node: master left to the node, ranges not carved", blue, vxlanCN(), nil, nil,
			`{"type":"netclass-vxlan","vni":5001,"remotes":["192.0.2.11","192.0.2.12"],"port":4789,"ipam":{"ranges":[[{"subnet":"10.30.0.0/24"}]],"type":"host-local"}}`},
		{"vxlan on a node: its options, its master and address, its block", blue, vxlanCN(), nodeOpts, node,
			`{"type":"netclass-vxlan","vni":5001,"master":"ens5","local":"192.0.2.20","remotes":["192.0.2.21"],"ipam":{"ranges":[[{"subnet":"10.30.0.0/24","rangeStart":"10.30.0.32","rangeEnd":"10.30.0.47"}]],"type":"host-local"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := netspec.Network(tc.net, tc.cn, tc.opts, tc.node)
			if err != nil {
				t.Fatal(err)
			}
			if string(cfg) != tc.want {
				t.Errorf("config\n got %s\nwant %s", cfg, tc.want)
			}
		})
	}
	if _, err := netspec.Network(network("x", "trunk", nil, i32(3)), vlanCN(`{"type":"dhcp"}`), nil, nil); err == nil || !strings.Contains(err.Error(), "spec.vlanId") {
		t.Errorf("type mismatch: %v", err)
	}
	raising := network("y", "trunk", i32(101), nil)
	raising.Spec.Bandwidth = &ncv1.NetworkBandwidth{Capacity: ptr.To(resource.MustParse("10G"))}
	limited := vlanCN(`{"type":"dhcp"}`)
	limited.Spec.Bandwidth = &ncv1.NetworkBandwidth{Capacity: ptr.To(resource.MustParse("1G"))}
	if _, err := netspec.Network(raising, limited, nil, nil); err == nil || !strings.Contains(err.Error(), "spec.bandwidth.capacity: 10G exceeds the capacity of ClusterNetwork") {
		t.Errorf("a Network raising its ClusterNetwork's bandwidth capacity: %v", err)
	}
	unassigned := &netspec.Node{Master: "ens5", Index: -1}
	if _, err := netspec.Network(blue, vxlanCN(), nil, unassigned); err == nil || !strings.Contains(err.Error(), "node index") {
		t.Errorf("host-local on a node without an index: %v", err)
	}
}

// TestDSCPPolicy: the ClusterNetwork's dscpPolicy reaches the plugin as
// its top-level dscpPolicy, and a Network asking for a DSCP it leaves out
// is refused, naming the field.
func TestDSCPPolicy(t *testing.T) {
	cn := vlanCN(`{"type":"dhcp"}`)
	cn.Spec.DSCPPolicy = &ncv1.DSCPPolicy{Allowed: []ncv1.DSCPRange{{First: 0, Last: 40}}, Remark: i32(8)}
	n := network("red", "trunk", i32(100), nil)
	cfg, err := netspec.Network(n, cn, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := `"dscpPolicy":{"allowed":[{"first":0,"last":40}],"remark":8}`; !strings.Contains(string(cfg), want) {
		t.Errorf("config %s lacks %s", cfg, want)
	}
	n.Spec.QoS = &ncv1.InterfaceQoS{DSCP: i32(46)}
	if _, err := netspec.Network(n, cn, nil, nil); err == nil || !strings.Contains(err.Error(), "qos.dscp: 46 is not allowed by dscpPolicy (allowed 0-40)") {
		t.Errorf("a Network marking EF under a policy allowing 0-40: %v, want it named", err)
	}
}

// TestQueueAndPCPMap: the ClusterNetwork's qos.queue reaches the plugin
// unless the Network names another, and the VLAN options' pcpMap reaches
// netclass-vlan, where an invalid one is refused.
func TestQueueAndPCPMap(t *testing.T) {
	cn := vlanCN(`{"type":"dhcp"}`)
	cn.Spec.QoS.Queue = "cake"
	cn.Spec.DefaultOptions.VLAN.PCPMap = map[string]int32{"46": 6, "10": 2}
	n := network("red", "trunk", i32(100), nil)
	cfg, err := netspec.Network(n, cn, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"netclass-vlan","vlanId":100,"master":"eth1","mtu":1500,"pcpMap":{"10":2,"46":6},"ipam":{"type":"dhcp"},"qos":{"egressRate":1000000,"egressBurst":10000,"dscp":10,"queue":"cake"}}`
	if string(cfg) != want {
		t.Errorf("config\n got %s\nwant %s", cfg, want)
	}
	n.Spec.QoS = &ncv1.InterfaceQoS{Queue: "tbf"}
	if cfg, err = netspec.Network(n, cn, nil, nil); err != nil || !strings.Contains(string(cfg), `"queue":"tbf"`) {
		t.Errorf("the Network's queue over the ClusterNetwork's: %s, %v", cfg, err)
	}
	cn.Spec.DefaultOptions.VLAN.PCPMap = map[string]int32{"46": 9}
	if _, err := netspec.Network(n, cn, nil, nil); err == nil || !strings.Contains(err.Error(), `pcpMap["46"]: must be a PCP from 0 to 7, got 9`) {
		t.Errorf("an invalid pcpMap: %v, want it named", err)
	}
}

func TestTenantIPAM(t *testing.T) {
	const hostLocal = `{"type":"host-local","ranges":[[{"subnet":"10.30.0.0/16"}]],"dataDir":"/var/lib/cni/networks"}`
	for _, tc := range []struct {
		name, cluster, tenant string
		want                  string   // rendered ipam, when no error
		errs                  []string // every one must be named
	}{
		{name: "no tenant ipam: the cluster's, admin paths kept", cluster: hostLocal, want: hostLocal},
		{name: "ranges and routes within the type", cluster: hostLocal,
			tenant: `{"ranges":[[{"subnet":"10.30.1.0/24","gateway":"10.30.1.1"}]],"routes":[{"dst":"10.40.0.0/16","gw":"10.30.1.1"}]}`,
			want:   `{"ranges":[[{"gateway":"10.30.1.1","subnet":"10.30.1.0/24"}]],"routes":[{"dst":"10.40.0.0/16","gw":"10.30.1.1"}],"type":"host-local"}`},
		{name: "same type spelled out", cluster: hostLocal, tenant: `{"type":"host-local","ranges":[[{"subnet":"10.30.1.0/24"}]]}`,
			want: `{"ranges":[[{"subnet":"10.30.1.0/24"}]],"type":"host-local"}`},
		{name: "dataDir", cluster: hostLocal, tenant: `{"ranges":[[{"subnet":"10.30.1.0/24"}]],"dataDir":"/etc"}`, errs: []string{"spec.ipam.dataDir"}},
		{name: "foreign plugin type", cluster: hostLocal, tenant: `{"type":"whereabouts","kubernetes":{"kubeconfig":"/etc/kubernetes/admin.conf"}}`,
			errs: []string{"spec.ipam.type", "spec.ipam.kubernetes"}},
		{name: "unknown key inside a range", cluster: hostLocal, tenant: `{"ranges":[[{"subnet":"10.30.1.0/24","dataDir":"/x"}]]}`,
			errs: []string{"spec.ipam.ranges[0][0].dataDir"}},
		{name: "bad values", cluster: hostLocal, tenant: `{"ranges":[[{"subnet":"nope"}]],"routes":[{"dst":"10.0.0.0/8","gw":7}]}`,
			errs: []string{"spec.ipam.ranges[0][0].subnet", "spec.ipam.routes[0].gw"}},
		{name: "dhcp: nothing to choose", cluster: `{"type":"dhcp"}`, tenant: `{"type":"dhcp","daemonSocketPath":"/run/evil.sock"}`,
			errs: []string{"spec.ipam.daemonSocketPath"}},
		{name: "cluster without ipam", tenant: `{"type":"host-local"}`, errs: []string{"spec.ipam: the ClusterNetwork sets no ipam type"}},
		{name: "cluster type not delegable", cluster: `{"type":"whereabouts"}`, tenant: `{"type":"whereabouts"}`, errs: []string{`IPAM type "whereabouts" does not let`}},
		{name: "not an object", cluster: hostLocal, tenant: `[1]`, errs: []string{"spec.ipam: must be a JSON object"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := netspec.TenantIPAM([]byte(tc.cluster), []byte(tc.tenant))
			if len(tc.errs) > 0 {
				if err == nil {
					t.Fatalf("accepted: %v", got)
				}
				for _, e := range tc.errs {
					if !strings.Contains(err.Error(), e) {
						t.Errorf("error %q does not name %q", err, e)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var want map[string]any
			if err := json.Unmarshal([]byte(tc.want), &want); err != nil {
				t.Fatal(err)
			}
			g, _ := json.Marshal(got)
			w, _ := json.Marshal(want)
			if string(g) != string(w) {
				t.Errorf("got %s, want %s", g, w)
			}
		})
	}
}

func podNetwork(name string, created int64, params string) *mnv1.PodNetwork {
	return &mnv1.PodNetwork{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(time.Unix(created, 0))},
		Spec:       mnv1.PodNetworkSpec{Enabled: true, Provider: "netclass.dev", Parameters: runtime.RawExtension{Raw: []byte(params)}},
	}
}

// heldAs gives n the SegmentHeld condition the controller writes for seg.
func heldAs(n *ncv1.Network, status metav1.ConditionStatus, seg netspec.Segment) *ncv1.Network {
	n.Status.Conditions = []metav1.Condition{{Type: ncv1.ConditionSegmentHeld, Status: status, Reason: ncv1.ReasonSegmentHeld,
		Message: netspec.HeldMessage(seg)}}
	return n
}

func TestSegmentOwner(t *testing.T) {
	older := func(n *ncv1.Network) *ncv1.Network { n.CreationTimestamp = metav1.NewTime(time.Unix(10, 0)); return n }
	vni7 := netspec.Segment{Kind: netspec.SegmentVXLAN, ID: 7}
	otherMaster := vlanCN(`{"type":"dhcp"}`)
	otherMaster.Name, otherMaster.Spec.DefaultOptions.VLAN.Master = "trunk2", "eth2"
	auto := vlanCN(`{"type":"dhcp"}`)
	auto.Name, auto.Spec.DefaultOptions.VLAN.Master = "trunk3", ""
	overlay2 := vxlanCN()
	overlay2.Name = "overlay2"
	cns := []*ncv1.ClusterNetwork{vlanCN(`{"type":"dhcp"}`), otherMaster, auto, vxlanCN(), overlay2}
	for _, tc := range []struct {
		name  string
		self  *ncv1.Network
		pns   []*mnv1.PodNetwork
		nets  []*ncv1.Network
		owner string // "" = self owns it
	}{
		{name: "alone", self: network("a", "overlay", nil, i32(7))},
		{name: "same vni, another cluster network", self: network("a", "overlay", nil, i32(7)),
			nets: []*ncv1.Network{older(network("b", "overlay2", nil, i32(7)))}, owner: "Network tenant/b"},
		{name: "same vni in a podnetwork, other port", self: network("a", "overlay", nil, i32(7)),
			pns: []*mnv1.PodNetwork{podNetwork("pn", 5, `{"type":"netclass-vxlan","vni":7,"port":8472,"master":"eth9"}`)}, owner: "PodNetwork pn"},
		{name: "newer holder loses", self: older(network("a", "overlay", nil, i32(7))),
			nets: []*ncv1.Network{network("b", "overlay2", nil, i32(7))}},
		{name: "same vlan, other master", self: network("a", "trunk", i32(100), nil),
			nets: []*ncv1.Network{older(network("b", "trunk2", i32(100), nil))}},
		{name: "same vlan, master left to the node", self: network("a", "trunk", i32(100), nil),
			nets: []*ncv1.Network{older(network("b", "trunk3", i32(100), nil))}, owner: "Network tenant/b"},
		{name: "same vlan on the same master in a podnetwork", self: network("a", "trunk", i32(100), nil),
			pns: []*mnv1.PodNetwork{podNetwork("pn", 5, `{"type":"netclass-vlan","vlanId":100,"master":"eth1"}`)}, owner: "PodNetwork pn"},
		{name: "same vlan on the same master in an sr-iov podnetwork", self: network("a", "trunk", i32(100), nil),
			pns: []*mnv1.PodNetwork{podNetwork("pn", 5, `{"type":"netclass-sriov","vlan":100,"master":"eth1"}`)}, owner: "PodNetwork pn"},
		{name: "same vlan in an sr-iov podnetwork by deviceID", self: network("a", "trunk", i32(100), nil),
			pns: []*mnv1.PodNetwork{podNetwork("pn", 5, `{"type":"netclass-sriov","vlan":100,"deviceID":"0000:3b:02.0"}`)}, owner: "PodNetwork pn"},
		{name: "same vlan in an sr-iov podnetwork on another PF", self: network("a", "trunk", i32(100), nil),
			pns: []*mnv1.PodNetwork{podNetwork("pn", 5, `{"type":"netclass-sriov","vlan":100,"master":"eth7"}`)}},
		{name: "an untagged sr-iov podnetwork holds no vlan", self: network("a", "trunk", i32(100), nil),
			pns: []*mnv1.PodNetwork{podNetwork("pn", 5, `{"type":"netclass-sriov","master":"eth1"}`)}},
		{name: "vlan and vxlan never collide", self: network("a", "trunk", i32(100), nil),
			nets: []*ncv1.Network{older(network("b", "overlay", nil, i32(100)))}},
		{name: "equal times: the name decides", self: network("b", "overlay", nil, i32(7)),
			nets: []*ncv1.Network{network("a", "overlay2", nil, i32(7))}, owner: "Network tenant/a"},
		{name: "equal times: the one found holding it keeps it", self: heldAs(network("b", "overlay", nil, i32(7)), metav1.ConditionTrue, vni7),
			nets: []*ncv1.Network{network("a", "overlay2", nil, i32(7))}},
		{name: "equal times: the other one holds it", self: network("a", "overlay", nil, i32(7)),
			nets: []*ncv1.Network{heldAs(network("b", "overlay2", nil, i32(7)), metav1.ConditionTrue, vni7)}, owner: "Network tenant/b"},
		{name: "equal times: held False is not held", self: heldAs(network("b", "overlay", nil, i32(7)), metav1.ConditionFalse, vni7),
			nets: []*ncv1.Network{network("a", "overlay2", nil, i32(7))}, owner: "Network tenant/a"},
		{name: "equal times: held for another segment is not held", self: heldAs(network("b", "overlay", nil, i32(7)), metav1.ConditionTrue,
			netspec.Segment{Kind: netspec.SegmentVXLAN, ID: 8}), nets: []*ncv1.Network{network("a", "overlay2", nil, i32(7))}, owner: "Network tenant/a"},
		{name: "held does not beat older", self: heldAs(network("a", "overlay", nil, i32(7)), metav1.ConditionTrue, vni7),
			nets: []*ncv1.Network{older(network("b", "overlay2", nil, i32(7)))}, owner: "Network tenant/b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			holders := netspec.Holders(tc.pns, append(tc.nets, tc.self), cns, nil)
			var cn *ncv1.ClusterNetwork
			for _, c := range cns {
				if c.Name == tc.self.Spec.ClusterNetworkName {
					cn = c
				}
			}
			owner := netspec.Owner(netspec.NetworkHolder(tc.self, cn, nil), holders)
			got := ""
			if owner != nil {
				got = owner.String()
			}
			if got != tc.owner {
				t.Errorf("owner %q, want %q", got, tc.owner)
			}
		})
	}
}

func TestBridgeSegments(t *testing.T) {
	a := podNetwork("a", 1, `{"type":"netclass-bridge","bridge":"blue0"}`)
	b := podNetwork("b", 2, `{"type":"netclass-bridge","bridge":"blue0"}`)
	c := podNetwork("c", 3, `{"type":"netclass-bridge"}`)
	d := podNetwork("d", 4, `{"type":"netclass-bridge","bridge":"netclass0"}`)
	holders := netspec.Holders([]*mnv1.PodNetwork{a, b, c, d}, nil, nil, nil)
	for i, want := range []string{"", "PodNetwork a", "", "PodNetwork c"} {
		got := ""
		if o := netspec.Owner(holders[i], holders); o != nil {
			got = o.String()
		}
		if got != want {
			t.Errorf("%s: owner %q, want %q", holders[i], got, want)
		}
	}
}

func TestHeldCondition(t *testing.T) {
	self := netspec.Holder{Kind: "Network", Namespace: "t", Name: "a", Segment: netspec.Segment{Kind: netspec.SegmentVXLAN, ID: 7}}
	owner := netspec.Holder{Kind: "PodNetwork", Name: "pn", Created: time.Unix(5, 0), Segment: self.Segment}
	for _, tc := range []struct {
		name   string
		self   netspec.Holder
		owner  *netspec.Holder
		status metav1.ConditionStatus // "" = no condition
		reason string
		msg    string
	}{
		{name: "no segment", self: netspec.Holder{Kind: "Network", Name: "sriov"}},
		{name: "holds it", self: self, status: metav1.ConditionTrue, reason: ncv1.ReasonSegmentHeld, msg: "VNI 7 belongs to this network"},
		{name: "another holds it", self: self, owner: &owner, status: metav1.ConditionFalse, reason: ncv1.ReasonSegmentConflict,
			msg: "VNI 7 is already used by PodNetwork pn (created 1970-01-01T00:00:05Z); a segment belongs to one network"},
		{name: "a Network of its namespace holds it", self: self, owner: &netspec.Holder{Kind: "Network", Namespace: "t", Name: "b", Created: time.Unix(5, 0), Segment: self.Segment},
			status: metav1.ConditionFalse, reason: ncv1.ReasonSegmentConflict,
			msg: "VNI 7 is already used by Network t/b (created 1970-01-01T00:00:05Z); a segment belongs to one network"},
		{name: "another namespace's Network holds it: not named", self: self, owner: &netspec.Holder{Kind: "Network", Namespace: "other", Name: "secret", Created: time.Unix(5, 0), Segment: self.Segment},
			status: metav1.ConditionFalse, reason: ncv1.ReasonSegmentConflict,
			msg: "VNI 7 is already used by a Network of another namespace (created 1970-01-01T00:00:05Z); a segment belongs to one network"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := netspec.HeldCondition(tc.self, tc.owner)
			if tc.status == "" {
				if c != nil {
					t.Fatalf("condition %+v, want none", c)
				}
				return
			}
			if c == nil || c.Type != ncv1.ConditionSegmentHeld || c.Status != tc.status || c.Reason != tc.reason || c.Message != tc.msg {
				t.Fatalf("condition %+v, want %s %s %q", c, tc.status, tc.reason, tc.msg)
			}
		})
	}
}

// A PodNetwork's condition is read back as held by PodNetworkHolder.
func TestPodNetworkHeld(t *testing.T) {
	pn := podNetwork("pn", 1, `{"type":"netclass-bridge","bridge":"blue0"}`)
	h := netspec.PodNetworkHolder(pn)
	if h.Held {
		t.Fatal("held without a condition")
	}
	pn.Status.Conditions = []metav1.Condition{*netspec.HeldCondition(h, nil)}
	if !netspec.PodNetworkHolder(pn).Held {
		t.Fatalf("not held with %+v", pn.Status.Conditions)
	}
}
