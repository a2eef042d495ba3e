package render

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netclass-dev/netclass/api/contract"
	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/conf/qos"
	"github.com/netclass-dev/netclass/shim/attachment"
	"github.com/netclass-dev/netclass/shim/network"
)

func allowStatic(n network.Network) network.Network {
	n.AllowStaticAddresses = true
	return n
}

func bridgeNet(extra string) network.Network {
	return network.Network{
		Ref:    attachment.NetworkRef{Class: "netclass", Kind: "PodNetwork", Name: "blue"},
		Labels: map[string]string{"tier": "data"},
		Type:   "netclass-bridge",
		Config: json.RawMessage(`{"cniVersion":"1.1.0","name":"blue","type":"netclass-bridge","bridge":"blue0",` + extra +
			`"ipam":{"type":"host-local","ranges":[[{"subnet":"10.10.1.0/24"}]]}}`),
	}
}

type list struct {
	CNIVersion string           `json:"cniVersion"`
	Name       string           `json:"name"`
	Plugins    []map[string]any `json:"plugins"`
}

func decode(t *testing.T, raw []byte) list {
	t.Helper()
	var l list
	if err := json.Unmarshal(raw, &l); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return l
}

func intp(i int) *int { return &i }

func TestConfList(t *testing.T) {
	for _, tc := range []struct {
		name  string
		in    Input
		check func(t *testing.T, l list)
		err   string
	}{
		{
			name: "network alone",
			in:   Input{Network: bridgeNet("")},
			check: func(t *testing.T, l list) {
				if l.Name != "blue" || l.CNIVersion != "1.1.0" || len(l.Plugins) != 1 {
					t.Fatalf("list = %+v", l)
				}
				p := l.Plugins[0]
				if p["type"] != "netclass-bridge" || p["bridge"] != "blue0" || p["name"] != nil || p["qos"] != nil || p["capabilities"] != nil {
					t.Fatalf("main plugin = %v", p)
				}
			},
		},
		{
			name: "claim qos merged over the network's, in the main plugin",
			in: Input{Network: bridgeNet(`"qos":{"dscp":10,"egressRate":1000000,"egressBurst":100000},`),
				Config: &contract.AttachmentConfig{QoS: &qos.Spec{DSCP: intp(46)}}},
			check: func(t *testing.T, l list) {
				q := l.Plugins[0]["qos"].(map[string]any)
				if q["dscp"] != 46.0 || q["egressRate"] != 1e6 || len(l.Plugins) != 1 {
					t.Fatalf("qos = %v", q)
				}
			},
		},
		{
			name: "static mac and ips ask for the capabilities",
			in: Input{Network: allowStatic(bridgeNet(`"capabilities":{"bandwidth":true},`)),
				Config: &contract.AttachmentConfig{MAC: "02:00:00:00:00:01", IPs: []string{"10.10.1.9/24"}}},
			check: func(t *testing.T, l list) {
				caps := l.Plugins[0]["capabilities"].(map[string]any)
				if caps["mac"] != true || caps["ips"] != true || caps["bandwidth"] != true {
					t.Fatalf("capabilities = %v", caps)
				}
			},
		},
		{
			name: "NetworkQoS rules chain netclass-qos, which takes the whole block",
			in: Input{Network: bridgeNet(`"qos":{"dscp":10,"egress":[{"priority":1,"dscp":8,"classifier":{}}]},`),
				Config: &contract.AttachmentConfig{QoS: &qos.Spec{EgressRate: 2000000, EgressBurst: 20000}},
				Rules:  []qos.Rule{{Priority: 40, DSCP: intp(20)}}},
			check: func(t *testing.T, l list) {
				if len(l.Plugins) != 2 || l.Plugins[1]["type"] != "netclass-qos" || l.Plugins[0]["qos"] != nil {
					t.Fatalf("plugins = %v", l.Plugins)
				}
				q := l.Plugins[1]["qos"].(map[string]any)
				egress := q["egress"].([]any)
				if q["dscp"] != 10.0 || q["egressRate"] != 2e6 || len(egress) != 2 || egress[1].(map[string]any)["priority"] != 40.0 {
					t.Fatalf("chained qos = %v", q)
				}
			},
		},
		{
			name: "an SR-IOV VF is passed as the deviceID capability",
			in: Input{Network: network.Network{Ref: attachment.NetworkRef{Kind: "PodNetwork", Name: "fast"}, Type: "netclass-sriov",
				Config: json.RawMessage(`{"cniVersion":"1.1.0","name":"fast","type":"netclass-sriov","master":"pf0"}`)}, DeviceID: "0000:03:00.2"},
			check: func(t *testing.T, l list) {
				caps := l.Plugins[0]["capabilities"].(map[string]any)
				if caps["deviceID"] != true || len(caps) != 1 {
					t.Fatalf("capabilities = %v", caps)
				}
			},
		},
		{
			name: "static mac and ips on a network that does not allow them",
			in: Input{Network: bridgeNet(""),
				Config: &contract.AttachmentConfig{MAC: "02:00:00:00:00:01", IPs: []string{"10.10.1.9/24"}}},
			err: "mac: PodNetwork blue does not allow static addresses (an admin allows them with the annotation netclass.dev/allow-static-addresses",
		},
		{
			name: "static ips on a Network: the ClusterNetwork decides",
			in: Input{Network: network.Network{Ref: attachment.NetworkRef{Kind: "Network", Namespace: "t", Name: "red"}, ClusterNetwork: "overlay"},
				Config: &contract.AttachmentConfig{IPs: []string{"10.10.1.9/24"}}},
			err: "ips: Network t/red does not allow static addresses (an admin allows them with spec.allowStaticAddresses on ClusterNetwork overlay)",
		},
		{
			name: "an invalid merge is refused",
			in: Input{Network: bridgeNet(""),
				Config: &contract.AttachmentConfig{QoS: &qos.Spec{EgressRate: 1000}}},
			err: "egressBurst",
		},
		{
			name: "broken network configuration",
			in:   Input{Network: network.Network{Ref: attachment.NetworkRef{Kind: "PodNetwork", Name: "x"}, Config: json.RawMessage(`{`)}},
			err:  "main plugin configuration",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := ConfList(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, decode(t, out))
		})
	}
}

func TestValidate(t *testing.T) {
	for _, bad := range []string{
		`{`, `{"name":"x","cniVersion":"1.1.0","plugins":[]}`,
		`{"name":"x","cniVersion":"1.1.0","plugins":[{"type":"bridge"}]}`,
		`{"name":"x","cniVersion":"1.1.0","plugins":[{"type":"netclass-qos","ipam":{"type":"host-local"}}]}`,
	} {
		if Validate([]byte(bad)) == nil {
			t.Errorf("Validate accepted %s", bad)
		}
	}
}

type fakePeers map[string][]netip.Addr

func (f fakePeers) Addresses(ns string, to ncv1.Destination, _ network.Network) ([]netip.Addr, error) {
	return f[to.PodSelector.MatchLabels["app"]], nil
}

func nqos(name string, priority int32, mutate func(*ncv1.NetworkQoS)) *ncv1.NetworkQoS {
	o := &ncv1.NetworkQoS{ObjectMeta: metav1.ObjectMeta{Namespace: "games", Name: name},
		Spec: ncv1.NetworkQoSSpec{Priority: priority, Egress: []ncv1.Rule{{DSCP: 10}, {DSCP: 20}}}}
	if mutate != nil {
		mutate(o)
	}
	return o
}

// everyNetclassNetwork selects every netclass network (what an omitted
// networkSelectors meant before it meant the default network).
func everyNetclassNetwork(o *ncv1.NetworkQoS) {
	o.Spec.NetworkSelectors = ncv1.NetworkSelectors{
		{NetworkSelectionType: ncv1.PodNetworks, PodNetworkSelector: &metav1.LabelSelector{}},
		{NetworkSelectionType: ncv1.Networks, NetworkSelector: &metav1.LabelSelector{}}}
}

// The default network (the pod's primary interface) is selected by an
// omitted networkSelectors and by DefaultNetwork, alone or with the
// netclass types; never by PodNetworks or Networks alone; and the
// default-network objects never select a netclass attachment.
func TestSelectsDefaultNetwork(t *testing.T) {
	sel := func(types ...ncv1.NetworkSelectionType) func(*ncv1.NetworkQoS) {
		return func(o *ncv1.NetworkQoS) {
			for _, ty := range types {
				s := ncv1.NetworkSelector{NetworkSelectionType: ty}
				switch ty {
				case ncv1.PodNetworks:
					s.PodNetworkSelector = &metav1.LabelSelector{}
				case ncv1.Networks:
					s.NetworkSelector = &metav1.LabelSelector{}
				}
				o.Spec.NetworkSelectors = append(o.Spec.NetworkSelectors, s)
			}
		}
	}
	for _, c := range []struct {
		name              string
		mutate            func(*ncv1.NetworkQoS)
		primary, netclass bool
	}{
		{"omitted", nil, true, false},
		{"DefaultNetwork", sel(ncv1.DefaultNetwork), true, false},
		{"PodNetworks", sel(ncv1.PodNetworks), false, true},
		{"Networks", sel(ncv1.Networks), false, false},
		{"all three", sel(ncv1.DefaultNetwork, ncv1.PodNetworks, ncv1.Networks), true, true},
	} {
		obj := nqos("q", 1, c.mutate)
		for _, tc := range []struct {
			net  network.Network
			want bool
		}{{network.Default(), c.primary}, {bridgeNet(""), c.netclass}} {
			got, err := Selects(obj, Target{Namespace: "games", Network: tc.net})
			if err != nil || got != tc.want {
				t.Errorf("%s on %s: selects %v, %v; want %v", c.name, tc.net.Ref, got, err, tc.want)
			}
		}
	}
}

func TestRules(t *testing.T) {
	rate, burst, port := int64(10000), int64(1000), int32(443)
	target := Target{Namespace: "games", PodLabels: map[string]string{"user-type": "paid"}, Network: bridgeNet("")}
	objs := []*ncv1.NetworkQoS{
		nqos("b-all", 1, everyNetclassNetwork),
		nqos("default-network-only", 9, nil),
		nqos("a-paid-only", 3, func(o *ncv1.NetworkQoS) {
			everyNetclassNetwork(o)
			o.Spec.PodSelector = metav1.LabelSelector{MatchLabels: map[string]string{"user-type": "paid"}}
			o.Spec.Egress = []ncv1.Rule{{DSCP: 46,
				Classifier: &ncv1.Classifier{
					To:    []ncv1.Destination{{IPBlock: &ncv1.IPBlock{CIDR: "0.0.0.0/0", Except: []ncv1.CIDR{"10.0.0.0/8"}}}},
					Ports: []ncv1.Port{{Protocol: ncv1.ProtocolTCP, Port: &port}}},
				Bandwidth: &ncv1.Bandwidth{Rate: &rate, Burst: &burst}}}
		}),
		nqos("free-only", 5, func(o *ncv1.NetworkQoS) {
			o.Spec.PodSelector = metav1.LabelSelector{MatchLabels: map[string]string{"user-type": "free"}}
		}),
		nqos("other-namespace", 5, func(o *ncv1.NetworkQoS) { o.Namespace = "else" }),
		nqos("networks-only", 5, func(o *ncv1.NetworkQoS) {
			o.Spec.NetworkSelectors = ncv1.NetworkSelectors{{NetworkSelectionType: ncv1.Networks}}
		}),
		nqos("data-podnetworks", 7, func(o *ncv1.NetworkQoS) {
			o.Spec.NetworkSelectors = ncv1.NetworkSelectors{{NetworkSelectionType: ncv1.PodNetworks,
				PodNetworkSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "data"}}}}
			o.Spec.Egress = []ncv1.Rule{
				{DSCP: 12, Classifier: &ncv1.Classifier{To: []ncv1.Destination{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}}}},
				{DSCP: 13, Classifier: &ncv1.Classifier{To: []ncv1.Destination{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "none"}}}}}},
			}
		}),
	}
	peers := fakePeers{"db": {netip.MustParseAddr("10.10.1.7"), netip.MustParseAddr("fd00::7")}}
	rules, _, err := Rules(objs, target, peers)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rules {
		got = append(got, func() string { b, _ := json.Marshal(r); return string(b) }())
	}
	want := []string{
		`{"priority":60,"dscp":46,"classifier":{"to":[{"ipBlock":{"cidr":"0.0.0.0/0","except":["10.0.0.0/8"]}}],"ports":[{"protocol":"TCP","port":443}]},"bandwidth":{"rate":10000,"burst":1000}}`,
		`{"priority":20,"dscp":10,"classifier":{}}`,
		`{"priority":21,"dscp":20,"classifier":{}}`,
		`{"priority":140,"dscp":12,"classifier":{"to":[{"ipBlock":{"cidr":"10.10.1.7/32"}},{"ipBlock":{"cidr":"fd00::7/128"}}]}}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("rules:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Compiled rules are valid qos rules.
	spec := &qos.Spec{Egress: rules}
	if err := spec.Validate("qos"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Rules(objs, target, nil); err == nil {
		t.Fatal("selectors without a resolver were not reported")
	}
}

// TestStateApartFromOtherCNIUsers: netclass-dra's attachments keep their
// plugin records and host-local reservations under StateDir, so its CNI GC
// (valid attachments: its own) never removes those of another CNI user with
// the same network name; a dataDir the network names is kept.
func TestStateApartFromOtherCNIUsers(t *testing.T) {
	l := decode(t, mustConfList(t, Input{Network: bridgeNet(""), Rules: []qos.Rule{{Priority: 1, DSCP: ptrInt(8)}}}))
	if l.Plugins[0]["dataDir"] != StateDir || l.Plugins[1]["dataDir"] != StateDir {
		t.Errorf("plugin dataDirs %v, %v: want %s", l.Plugins[0]["dataDir"], l.Plugins[1]["dataDir"], StateDir)
	}
	if ipam := l.Plugins[0]["ipam"].(map[string]any); ipam["dataDir"] != IPAMStateDir {
		t.Errorf("host-local dataDir %v, want %s", ipam["dataDir"], IPAMStateDir)
	}
	own := bridgeNet(`"dataDir":"/srv/cni",`)
	own.Config = json.RawMessage(strings.Replace(string(own.Config), `"type":"host-local"`, `"type":"host-local","dataDir":"/srv/ipam"`, 1))
	l = decode(t, mustConfList(t, Input{Network: own}))
	if l.Plugins[0]["dataDir"] != "/srv/cni" || l.Plugins[0]["ipam"].(map[string]any)["dataDir"] != "/srv/ipam" {
		t.Errorf("an admin's dataDirs were replaced: %v", l.Plugins[0])
	}
}

func mustConfList(t *testing.T, in Input) []byte {
	t.Helper()
	out, err := ConfList(in)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func ptrInt(v int) *int { return &v }

// Every attachment netclass-dra makes is guarded and starts closed,
// whatever the network's parameters say.
func TestPortSecurity(t *testing.T) {
	guarded := map[string]any{"spoofCheck": true, "startClosed": true}
	for _, tc := range []struct {
		name, typ, config string
		want              any
	}{
		{"bridge", "netclass-bridge", `{"type":"netclass-bridge","bridge":"b0"}`, guarded},
		{"bridge that turned it off", "netclass-bridge", `{"type":"netclass-bridge","portSecurity":{"spoofCheck":false}}`, guarded},
		{"vxlan", "netclass-vxlan", `{"type":"netclass-vxlan","vni":100,"remotes":["192.0.2.2"],"master":"eth1"}`, guarded},
		{"vlan on a host bridge", "netclass-vlan", `{"type":"netclass-vlan","master":"eth1","vlanId":10}`, guarded},
		{"vlan in the pod", "netclass-vlan", `{"type":"netclass-vlan","master":"eth1","vlanId":10,"linkInContainer":true,"portSecurity":{"spoofCheck":false}}`, guarded},
		{"sriov", "netclass-sriov", `{"type":"netclass-sriov","master":"eth1"}`, guarded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := network.Network{Ref: attachment.NetworkRef{Kind: "PodNetwork", Name: "n"}, Type: tc.typ, Config: json.RawMessage(tc.config)}
			out, err := ConfList(Input{Network: n})
			if err != nil {
				t.Fatal(err)
			}
			got, ok := decode(t, out).Plugins[0]["portSecurity"]
			if tc.want == nil && ok {
				t.Errorf("portSecurity %v, want none", got)
			}
			if tc.want != nil && fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("portSecurity %v, want %v", got, tc.want)
			}
		})
	}
}
