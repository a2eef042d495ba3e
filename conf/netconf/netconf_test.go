package netconf

import (
	"errors"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
)

// cniError asserts err is a CNI error with the given code whose message
// contains every want substring.
func cniError(t *testing.T, err error, code uint, want ...string) {
	t.Helper()
	var e *types.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not a CNI error", err, err)
	}
	if e.Code != code {
		t.Errorf("code = %d, want %d (%s)", e.Code, code, e.Msg)
	}
	for _, w := range want {
		if !strings.Contains(e.Msg, w) {
			t.Errorf("message %q does not contain %q", e.Msg, w)
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		conf string
		code uint
		want []string
	}{
		{"not json", `{"name":`, types.ErrDecodingFailure, []string{"decode configuration"}},
		{"not an object", `[1,2]`, types.ErrDecodingFailure, []string{"expected a JSON object"}},
		{"no type", `{"name":"n"}`, types.ErrInvalidNetworkConfig, []string{"type: is required"}},
		{"foreign type", `{"name":"n","type":"bridge"}`, types.ErrInvalidNetworkConfig, []string{`"bridge" is not a netclass plugin`}},
		{"wrong field type", `{"name":"n","type":"netclass-bridge","mtu":"big"}`, types.ErrInvalidNetworkConfig, []string{"mtu: cannot use JSON string as int"}},
		{"nested wrong type", `{"name":"n","type":"netclass-bridge","qos":{"egress":[{"dscp":"ef"}]}}`, types.ErrInvalidNetworkConfig, []string{"qos.egress.dscp: cannot use JSON string"}},
		{"misspelt qos key", `{"name":"n","type":"netclass-bridge","qos":{"ingresRate":5}}`, types.ErrInvalidNetworkConfig, []string{`qos: unknown field "ingresRate"`}},
		{"misspelt runtime qos key", `{"name":"n","type":"netclass-qos","runtimeConfig":{"qos":{"dscpp":5}}}`, types.ErrInvalidNetworkConfig, []string{`runtimeConfig.qos: unknown field "dscpp"`}},
		{"bridge: all problems at once", `{"type":"netclass-bridge","bridge":"this-name-is-too-long","mtu":9,"mac":"01:00:5e:00:00:01","ipMasq":true,"qos":{"dscp":77},"ipam":{}}`,
			types.ErrInvalidNetworkConfig, []string{"name: is required", "bridge: \"this-name-is-too-long\" is longer than 15", "mtu: must be between 68 and 65535, got 9", "mac: must be a unicast MAC", "ipMasq: needs ipam", "qos.dscp: must be between 0 and 63", "ipam.type: is required"}},
		{"vxlan: everything wrong", `{"name":"n","type":"netclass-vxlan","vni":16777216,"group":"10.0.0.1","remotes":["224.0.0.1","fd00::1","bad"],"port":70000}`,
			types.ErrInvalidNetworkConfig, []string{"vni: must be between 1 and 16777215", "master: master (the underlay device) or local", `group: must be a multicast IP address, got "10.0.0.1"`, "remotes: cannot be combined with group", `remotes[0]: must be a unicast`, `remotes[2]: must be a unicast`, "port: must be between 1 and 65535", "remotes[1]: fd00::1 is not of the same IP family"}},
		{"vlan", `{"name":"n","type":"netclass-vlan","vlanId":4095}`, types.ErrInvalidNetworkConfig, []string{"master: is required", "vlanId: must be between 1 and 4094, got 4095"}},
		{"sriov", `{"name":"n","type":"netclass-sriov","deviceID":"03:00.1","vlan":5000,"vlanQoS":9,"vlanProto":"qinq","spoofchk":"yes","trust":"1","linkState":"up","minTxRate":10,"maxTxRate":5}`,
			types.ErrInvalidNetworkConfig, []string{"deviceID: must be a PCI address", "vlan: must be between 0 and 4094", "vlanQoS: must be between 0 and 7", "vlanProto: must be 802.1q or 802.1ad", `spoofchk: must be "on" or "off"`, `trust: must be "on" or "off"`, "linkState: must be auto, enable or disable", "minTxRate: must not exceed maxTxRate"}},
		{"sriov needs a device", `{"name":"n","type":"netclass-sriov"}`, types.ErrInvalidNetworkConfig, []string{"deviceID: deviceID (a VF's PCI address"}},
		{"qos chain with ipam", `{"name":"n","type":"netclass-qos","ipam":{"type":"host-local"}}`, types.ErrInvalidNetworkConfig, []string{"ipam: netclass-qos does not allocate"}},
		{"runtime bandwidth", `{"name":"n","type":"netclass-qos","runtimeConfig":{"bandwidth":{"ingressRate":1000}}}`, types.ErrInvalidNetworkConfig, []string{"runtimeConfig.bandwidth.ingressBurst: is required"}},
		{"misspelt args qos key", `{"name":"n","type":"netclass-bridge","args":{"cni":{"qos":{"dscpp":5}}}}`, types.ErrInvalidNetworkConfig, []string{`args.cni.qos: unknown field "dscpp"`}},
		{"dscp policy left out 0", `{"name":"n","type":"netclass-bridge","dscpPolicy":{"allowed":[{"first":8,"last":15}]}}`, types.ErrInvalidNetworkConfig, []string{"dscpPolicy.remark: is required when allowed leaves out 0"}},
		{"dscp policy: what every side asks for", `{"name":"n","type":"netclass-bridge","dscpPolicy":{"allowed":[{"first":0,"last":40}]},"qos":{"dscp":46},
			"runtimeConfig":{"qos":{"egress":[{"priority":1,"dscp":10},{"priority":2,"dscp":48}]}},"args":{"cni":{"qos":{"dscp":56}}}}`, types.ErrInvalidNetworkConfig,
			[]string{"qos.dscp: 46 is not allowed by dscpPolicy (allowed 0-40)", "runtimeConfig.qos.egress[1].dscp: 48 is not allowed", "args.cni.qos.dscp: 56 is not allowed"}},
		{"dscp policy is not the pod's to set", `{"name":"n","type":"netclass-qos","runtimeConfig":{"qos":{"policy":{"allowed":[]}}}}`, types.ErrInvalidNetworkConfig, []string{`runtimeConfig.qos: unknown field "policy"`}},
		{"invalid args qos", `{"name":"n","type":"netclass-qos","args":{"cni":{"qos":{"dscp":64,"egressRate":1000}}}}`, types.ErrInvalidNetworkConfig, []string{"args.cni.qos.dscp: must be between 0 and 63", "args.cni.qos.egressBurst: is required"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.conf))
			if err == nil {
				t.Fatal("Parse() succeeded, want an error")
			}
			cniError(t, err, tc.code, tc.want...)
		})
	}
}

func TestParseBridgeDefaults(t *testing.T) {
	c, err := ParseBridge([]byte(`{"cniVersion":"1.1.0","name":"blue","type":"netclass-bridge","isDefaultGateway":true,
		"ipam":{"type":"host-local","ranges":[[{"subnet":"10.10.1.0/24"}]]},
		"qos":{"dscp":10,"egressRate":1000,"egressBurst":100},
		"runtimeConfig":{"bandwidth":{"ingressRate":8000,"ingressBurst":800},"qos":{"dscp":12},"mac":"02:00:00:00:00:01"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.BrName != DefaultBridge || !c.IsGateway || c.DataDir != DefaultDataDir || c.IPAM.Type != "host-local" {
		t.Errorf("defaults not applied: %+v", c)
	}
	q := c.EffectiveQoS
	if q == nil || *q.DSCP != 12 || q.EgressRate != 1000 || q.IngressRate != 8000 {
		t.Errorf("effective qos = %+v: want runtime dscp 12 over static 10, static egress, runtime ingress", q)
	}
	if got, from := c.MAC("", c.Mac); got != "02:00:00:00:00:01" || from != "runtimeConfig.mac" {
		t.Errorf("MAC() = %q from %s, want the runtimeConfig one", got, from)
	}
	if len(c.Raw) == 0 {
		t.Error("Raw must keep the configuration for IPAM delegates")
	}
}

// args.cni.qos (Multus' cni-args) is merged last: over the static block,
// runtimeConfig.bandwidth and runtimeConfig.qos; a field it leaves unset keeps
// theirs.
func TestArgsQoSPrecedence(t *testing.T) {
	for _, tc := range []struct {
		name, extra string
		dscp        int
		egress      int64
		rules       int
	}{
		{"static only", ``, 10, 1000, 1},
		{"runtime over static", `,"runtimeConfig":{"qos":{"dscp":12}}`, 12, 1000, 1},
		{"args over static", `,"args":{"cni":{"qos":{"dscp":20,"egress":[]}}}`, 20, 1000, 0},
		{"args over runtime", `,"runtimeConfig":{"qos":{"dscp":12,"egressRate":3000,"egressBurst":300}},"args":{"cni":{"qos":{"dscp":46}}}`, 46, 3000, 1},
		{"args over runtime bandwidth", `,"runtimeConfig":{"bandwidth":{"egressRate":3000,"egressBurst":300}},"args":{"cni":{"qos":{"egressRate":2000,"egressBurst":200}}}`, 10, 2000, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseBridge([]byte(`{"name":"blue","type":"netclass-bridge",
				"qos":{"dscp":10,"egressRate":1000,"egressBurst":100,"egress":[{"priority":1,"dscp":8}]}` + tc.extra + `}`))
			if err != nil {
				t.Fatal(err)
			}
			q := c.EffectiveQoS
			if q == nil || *q.DSCP != tc.dscp || q.EgressRate != tc.egress || len(q.Egress) != tc.rules {
				t.Errorf("effective qos = %+v, want dscp %d, egress %d, %d rules", q, tc.dscp, tc.egress, tc.rules)
			}
		})
	}
}

func TestParseVXLANDefaults(t *testing.T) {
	c, err := ParseVXLAN([]byte(`{"name":"v","type":"netclass-vxlan","vni":100,"local":"192.168.0.1","remotes":["192.168.0.2"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Port != DefaultVXLANPort || c.Learning == nil || !*c.Learning || c.BridgeName() != "ncbr100" || c.DeviceName() != "ncvx100" {
		t.Errorf("defaults not applied: %+v", c)
	}
	if c.IPv6Underlay() || len(c.RemoteIPs) != 1 || !c.LocalIP.IsValid() {
		t.Errorf("addresses not parsed: %+v", c)
	}
	if c.EffectiveQoS != nil {
		t.Errorf("no qos was configured, got %+v", c.EffectiveQoS)
	}
}

func TestRenderParameters(t *testing.T) {
	out, err := RenderParameters("blue-network", "1.1.0", []byte(`{"type":"netclass-bridge","bridge":"blue0","ipam":{"type":"host-local","ranges":[[{"subnet":"10.10.1.0/24"}]]}}`))
	if err != nil {
		t.Fatal(err)
	}
	c, err := ParseBridge(out)
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "blue-network" || c.CNIVersion != "1.1.0" || c.BrName != "blue0" {
		t.Errorf("rendered %s", out)
	}
	for _, bad := range []string{`{"type":"netclass-qos"}`, `null`, `{"type":"bridge"}`, `{"type":"netclass-vlan","vlanId":0,"master":"eth0"}`} {
		if _, err := RenderParameters("n", "1.1.0", []byte(bad)); err == nil {
			t.Errorf("RenderParameters(%s) succeeded, want an error", bad)
		}
	}
}

func TestValidateIfName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"net1", true}, {"data-0.v100", true}, {"a", true}, {"abcdefghijklmno", true},
		{"", false}, {"abcdefghijklmnop", false}, {".", false}, {"..", false},
		{"a/b", false}, {"a:b", false}, {"a b", false}, {"a\tb", false},
		{"net%d", false}, {"net\x00", false}, {"net\x7f", false}, {"net\x1b", false},
		{"nét1", false}, {"net\u00a0", false},
	} {
		err := ValidateIfName("ifname", tc.name)
		if (err == nil) != tc.ok {
			t.Errorf("ValidateIfName(%q) = %v, want ok=%v", tc.name, err, tc.ok)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "ifname: ") {
			t.Errorf("ValidateIfName(%q) does not name the field: %v", tc.name, err)
		}
	}
}

func TestValidateMAC(t *testing.T) {
	for _, tc := range []struct {
		mac, err string
	}{
		{"02:00:00:00:00:01", ""},
		{"02-00-00-00-00-01", ""},
		{"zz", "not a MAC address"},
		{"00:00:00:00:00:00", "all-zero"},
		{"01:00:5e:00:00:01", "unicast"},
		{"ff:ff:ff:ff:ff:ff", "unicast"},
		{"02:00:00:00:00:00:00:01", "6-byte"},
	} {
		err := ValidateMAC("runtimeConfig.mac", tc.mac)
		if tc.err == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.mac, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.HasPrefix(err.Error(), "runtimeConfig.mac: ") {
			t.Errorf("%s: error %v, want the field and %q", tc.mac, err, tc.err)
		}
	}
}

// A DSCP policy alone asks for rules (the re-marking of what the pod
// marks), and stays the static configuration's whatever the runtime passes.
func TestDSCPPolicyAlone(t *testing.T) {
	c, err := ParseBridge([]byte(`{"name":"blue","type":"netclass-bridge","dscpPolicy":{"allowed":[{"first":0,"last":40}]},
		"runtimeConfig":{"qos":{"dscp":12}}}`))
	if err != nil {
		t.Fatal(err)
	}
	q := c.EffectiveQoS
	if q == nil || q.Policy == nil || q.Policy.Allows(41) || !q.Policy.Allows(40) || *q.DSCP != 12 {
		t.Fatalf("effective qos = %+v, want the runtime's dscp under the static policy", q)
	}
	c, err = ParseBridge([]byte(`{"name":"blue","type":"netclass-bridge","dscpPolicy":{"allowed":[{"first":0,"last":40}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.EffectiveQoS == nil || c.EffectiveQoS.Policy == nil {
		t.Errorf("a policy alone gives no effective qos: %+v", c.EffectiveQoS)
	}
}
