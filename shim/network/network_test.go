package network

import (
	"encoding/json"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	mnv1 "github.com/netclass-dev/netclass/api/multinetwork/v1"
	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
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
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, skip := FromPodNetwork("netclass", tc.pn)
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

func nodeNetwork(cluster string, status metav1.ConditionStatus) *ncv1.NodeNetwork {
	return &ncv1.NodeNetwork{
		ObjectMeta: metav1.ObjectMeta{Name: cluster + ".node"},
		Spec:       ncv1.NodeNetworkSpec{ClusterNetworkName: cluster, NodeName: "node"},
		Status:     ncv1.NodeNetworkStatus{Conditions: []metav1.Condition{{Type: "Ready", Status: status, Reason: "x"}}},
	}
}

const vxlanConfig = `{"type":"netclass-vxlan","vni":100,"local":"10.250.0.1","ipam":{"type":"host-local","ranges":[[{"subnet":"10.20.0.0/24"}]]}}`

func TestFromNetwork(t *testing.T) {
	n, skip := FromNetwork("nets", network("tenant-a", "red", "overlay", vxlanConfig), nodeNetwork("overlay", metav1.ConditionTrue))
	if skip != nil {
		t.Fatalf("not offered: %v", skip)
	}
	if n.VNI != 100 || n.ClusterNetwork != "overlay" || n.Ref.Namespace != "tenant-a" || n.Type != "netclass-vxlan" {
		t.Fatalf("network = %+v", n)
	}
	if !strings.Contains(string(n.Config), `"name":"tenant-a_red"`) {
		t.Fatalf("config not named after namespace and name: %s", n.Config)
	}
	for _, tc := range []struct {
		name   string
		n      *ncv1.Network
		nn     *ncv1.NodeNetwork
		reason string
	}{
		{"no node network", network("a", "red", "overlay", vxlanConfig), nil, ReasonNodeNetworkAbsent},
		{"node network not ready", network("a", "red", "overlay", vxlanConfig), nodeNetwork("overlay", metav1.ConditionFalse), ReasonNodeNotReady},
		{"not rendered", network("a", "red", "overlay", ""), nodeNetwork("overlay", metav1.ConditionTrue), ReasonNotReady},
		{"invalid rendering", network("a", "red", "overlay", `{"type":"netclass-vxlan"}`), nodeNetwork("overlay", metav1.ConditionTrue), ReasonInvalidConfig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, skip := FromNetwork("nets", tc.n, tc.nn)
			if skip == nil || skip.Reason != tc.reason {
				t.Fatalf("skip = %v, want %s", skip, tc.reason)
			}
		})
	}
}

type fakeObjects struct {
	classes  []*mnv1.NetworkClass
	pns      []*mnv1.PodNetwork
	nets     []*ncv1.Network
	nodeNets []*ncv1.NodeNetwork
}

func (f fakeObjects) NetworkClasses() ([]*mnv1.NetworkClass, error) { return f.classes, nil }
func (f fakeObjects) PodNetworks() ([]*mnv1.PodNetwork, error)      { return f.pns, nil }
func (f fakeObjects) Networks() ([]*ncv1.Network, error)            { return f.nets, nil }
func (f fakeObjects) NodeNetworks() ([]*ncv1.NodeNetwork, error)    { return f.nodeNets, nil }

type links map[string]bool

func (l links) HasLink(name string) bool { return l[name] }

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
		nodeNets: []*ncv1.NodeNetwork{nodeNetwork("overlay", metav1.ConditionTrue)},
	}
	nets, skips, err := Collect(objs, links{"eth0": true})
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
	nets, _, _ = Collect(objs, links{"eth9": true})
	if len(nets) != 5 {
		t.Fatalf("with eth9 present %d networks are offered, want 5", len(nets))
	}
}
