package netconf

import (
	"errors"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
)

// FuzzParse checks that no input makes the parsers panic and that every
// failure is a CNI error with a decoding or configuration code.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		`{"cniVersion":"1.1.0","name":"b","type":"netclass-bridge","bridge":"br0","isGateway":true,"ipam":{"type":"host-local"}}`,
		`{"name":"v","type":"netclass-vxlan","vni":7,"master":"eth0","group":"239.1.1.1"}`,
		`{"name":"v","type":"netclass-vxlan","vni":7,"local":"fd00::1","remotes":["fd00::2"]}`,
		`{"name":"v","type":"netclass-vxlan","vni":7,"master":"eth0","bandwidthShare":{"capacity":100000000,"guarantee":30000000,"ceiling":100000000}}`,
		`{"name":"l","type":"netclass-vlan","master":"eth0","vlanId":100,"linkInContainer":true}`,
		`{"name":"l","type":"netclass-vlan","master":"eth0","vlanId":100,"pcpMap":{"46":5,"0":1}}`,
		`{"name":"q","type":"netclass-qos","qos":{"egressRate":8000,"egressBurst":800,"queue":"cake"}}`,
		`{"name":"s","type":"netclass-sriov","deviceID":"0000:03:00.2","vlan":10,"vlanQoS":3,"vlanProto":"802.1ad","spoofchk":"on","trust":"off","linkState":"auto","minTxRate":1,"maxTxRate":100}`,
		`{"name":"q","type":"netclass-qos","qos":{"dscp":46,"egress":[{"priority":10,"dscp":20,"classifier":{"to":[{"ipBlock":{"cidr":"0.0.0.0/0","except":["10.0.0.0/8"]}}],"ports":[{"protocol":"TCP","port":80}]},"bandwidth":{"rate":1000,"burst":1000}}]}}`,
		`{"name":"q","type":"netclass-qos","runtimeConfig":{"bandwidth":{"ingressRate":1,"ingressBurst":1}}}`,
		`{"name":"q","type":"netclass-qos","args":{"cni":{"qos":{"dscp":46,"egress":[{"priority":2,"dscp":8}]}}}}`,
		`{}`, `null`, `[]`, `{"type":1}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		_, err := Parse(data)
		if err == nil {
			return
		}
		var e *types.Error
		if !errors.As(err, &e) {
			t.Fatalf("error %v is not a CNI error", err)
		}
		if e.Code != types.ErrDecodingFailure && e.Code != types.ErrInvalidNetworkConfig {
			t.Fatalf("unexpected code %d: %s", e.Code, e.Msg)
		}
	})
}
