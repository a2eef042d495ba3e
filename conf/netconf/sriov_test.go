package netconf

import (
	"testing"

	"github.com/containernetworking/cni/pkg/types"
)

func TestSRIOVOffload(t *testing.T) {
	tests := []struct {
		name       string
		conf       string
		mbps       int64
		shapedRate int64 // egress rate left for tbf
	}{
		{"no qos", `{"name":"n","type":"netclass-sriov","master":"pf0","offloadEgressRate":true}`, 0, 0},
		{"not offloaded", `{"name":"n","type":"netclass-sriov","master":"pf0","qos":{"egressRate":10000000,"egressBurst":100000}}`, 0, 10000000},
		{"offloaded, exact", `{"name":"n","type":"netclass-sriov","master":"pf0","offloadEgressRate":true,"qos":{"egressRate":10000000,"egressBurst":100000,"dscp":1}}`, 10, 0},
		{"offloaded, rounded up", `{"name":"n","type":"netclass-sriov","master":"pf0","offloadEgressRate":true,"qos":{"egressRate":10000001,"egressBurst":100000}}`, 11, 0},
		{"runtime bandwidth offloaded", `{"name":"n","type":"netclass-sriov","master":"pf0","offloadEgressRate":true,"runtimeConfig":{"bandwidth":{"egressRate":1500000,"egressBurst":1000}}}`, 2, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseSRIOV([]byte(tc.conf))
			if err != nil {
				t.Fatal(err)
			}
			if got := c.OffloadedEgressMbps(); got != tc.mbps {
				t.Errorf("OffloadedEgressMbps() = %d, want %d", got, tc.mbps)
			}
			var shaped int64
			if s := c.ShapedQoS(); s != nil {
				shaped = s.EgressRate
				if tc.mbps > 0 && (s.EgressBurst != 0 || s.DSCP == nil && c.EffectiveQoS.DSCP != nil) {
					t.Errorf("ShapedQoS() = %+v: burst kept or dscp lost", s)
				}
			}
			if shaped != tc.shapedRate {
				t.Errorf("ShapedQoS().EgressRate = %d, want %d", shaped, tc.shapedRate)
			}
			if tc.mbps > 0 && c.EffectiveQoS.EgressRate == 0 {
				t.Error("ShapedQoS changed the effective QoS it was derived from")
			}
		})
	}
}

func TestSRIOVErrors(t *testing.T) {
	tests := []struct {
		name string
		conf string
		want []string
	}{
		{"rates out of range", `{"name":"n","type":"netclass-sriov","master":"pf0","minTxRate":-1,"maxTxRate":4294967296}`,
			[]string{"minTxRate: must be between 0 and 4294967295 Mbit/s, got -1", "maxTxRate: must be between 0 and 4294967295 Mbit/s, got 4294967296"}},
		{"offload with maxTxRate", `{"name":"n","type":"netclass-sriov","master":"pf0","maxTxRate":10,"offloadEgressRate":true}`,
			[]string{"offloadEgressRate: cannot be combined with maxTxRate"}},
		{"min above the offloaded rate", `{"name":"n","type":"netclass-sriov","master":"pf0","minTxRate":20,"offloadEgressRate":true,"qos":{"egressRate":10000000,"egressBurst":1000}}`,
			[]string{"minTxRate: must not exceed the offloaded qos.egressRate (20 > 10 Mbit/s)"}},
		{"offloaded rate too large", `{"name":"n","type":"netclass-sriov","master":"pf0","offloadEgressRate":true,"qos":{"egressRate":9000000000000000000,"egressBurst":1000}}`,
			[]string{"qos.egressBurst: is too small for egressRate"}}, // the tbf limits refuse it before the VF rate check
		{"vlanQoS without vlan", `{"name":"n","type":"netclass-sriov","master":"pf0","vlanQoS":3}`, []string{"vlan: must be set (1-4094) when vlanQoS or vlanProto is set"}},
		{"bad master and mac", `{"name":"n","type":"netclass-sriov","master":"a/b","mac":"ff:ff:ff:ff:ff:ff","mtu":20}`,
			[]string{`master: "a/b" must not contain`, "mac: must be a unicast", "mtu: must be between 68 and 65535"}},
		{"runtime deviceID", `{"name":"n","type":"netclass-sriov","runtimeConfig":{"deviceID":"0000:03:00"}}`, []string{`runtimeConfig.deviceID: must be a PCI address like 0000:03:00.2, got "0000:03:00"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseSRIOV([]byte(tc.conf))
			cniError(t, err, types.ErrInvalidNetworkConfig, tc.want...)
		})
	}
}

func TestSRIOVRuntimeDeviceIDWins(t *testing.T) {
	c, err := ParseSRIOV([]byte(`{"name":"n","type":"netclass-sriov","deviceID":"0000:03:00.2","vlanProto":"802.1AD","vlan":4,"runtimeConfig":{"deviceID":"0000:03:00.3"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.DeviceID != "0000:03:00.3" || c.VLANProto != "802.1ad" {
		t.Errorf("deviceID %q, vlanProto %q; want the runtime's 0000:03:00.3 and 802.1ad", c.DeviceID, c.VLANProto)
	}
}

func TestIsPCIAddress(t *testing.T) {
	for s, want := range map[string]bool{
		"0000:03:00.2": true, "abcd:ef:1f.7": true, "ABCD:EF:10.0": true,
		"0000:03:00.8": false, "0000:03:20.0": false, "0000:3:00.2": false, "03:00.2": false,
		"0000:03:00:2": false, "000g:03:00.2": false, "": false, "0000:03:00.22": false,
	} {
		if got := isPCIAddress(s); got != want {
			t.Errorf("isPCIAddress(%q) = %v, want %v", s, got, want)
		}
	}
}
