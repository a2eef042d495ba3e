package render

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/netclass-dev/netclass/conf/bandwidth"
	"github.com/netclass-dev/netclass/conf/netconf"
	"github.com/netclass-dev/netclass/shim/attachment"
	"github.com/netclass-dev/netclass/shim/network"
)

// TestShare: a netclass-vxlan attachment allocated bandwidth gets its place
// in the VNI's shared scheduler, in the rendered configuration the plugin
// parses; the ceiling follows the network's ceiling option, and the tbf
// ceiling with it.
func TestShare(t *testing.T) {
	const vxlan = `{"type":"netclass-vxlan","vni":100,"remotes":["192.0.2.2"],"master":"eth1"}`
	pol := &bandwidth.Policy{Capacity: 100e6, Max: 100e6}
	workConserving := &bandwidth.Policy{Capacity: 100e6, Max: 100e6, Ceiling: "Capacity"}
	for _, tc := range []struct {
		name, typ  string
		pol        *bandwidth.Policy
		allocated  int64
		want       *netconf.BandwidthShare
		wantEgress int64
	}{
		{"allocation", "netclass-vxlan", pol, 30e6, &netconf.BandwidthShare{Capacity: 100e6, Guarantee: 30e6, Ceiling: 30e6}, 30e6},
		{"work-conserving", "netclass-vxlan", workConserving, 30e6, &netconf.BandwidthShare{Capacity: 100e6, Guarantee: 30e6, Ceiling: 100e6}, 100e6},
		{"best effort", "netclass-vxlan", pol, 0, nil, 0},
		{"no bandwidth", "netclass-vxlan", nil, 30e6, nil, 30e6},
		{"not vxlan", "netclass-bridge", pol, 30e6, nil, 30e6},
		{"beyond any link", "netclass-vxlan", &bandwidth.Policy{Capacity: 2 * netconf.MaxShareRate}, 30e6, nil, 30e6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			config := vxlan
			if tc.typ != "netclass-vxlan" {
				config = `{"type":"netclass-bridge","bridge":"b0"}`
			}
			n := network.Network{Ref: attachment.NetworkRef{Kind: "PodNetwork", Name: "n"}, Type: tc.typ, Config: json.RawMessage(config), Bandwidth: tc.pol}
			in := Input{Network: n, Allocated: tc.allocated}
			if got := Share(in); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("Share = %+v, want %+v", got, tc.want)
			}
			out, err := ConfList(in)
			if err != nil {
				t.Fatal(err)
			}
			main := decode(t, out).Plugins[0]
			if _, ok := main["bandwidthShare"]; ok != (tc.want != nil) {
				t.Errorf("bandwidthShare rendered: %v, want %v", main["bandwidthShare"], tc.want != nil)
			}
			q, err := AttachmentQoS(in)
			if err != nil {
				t.Fatal(err)
			}
			var got int64
			if q != nil {
				got = q.EgressRate
			}
			if got != tc.wantEgress {
				t.Errorf("egress ceiling %d, want %d", got, tc.wantEgress)
			}
		})
	}
}
