package netspec_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"

	"github.com/netclass-dev/netclass/conf/netspec"
)

func TestNodeBlock(t *testing.T) {
	for _, tc := range []struct {
		subnet      string
		index       int
		first, last string
		err         string
	}{
		{subnet: "10.30.0.0/24", index: 0, first: "10.30.0.1", last: "10.30.0.15"},
		{subnet: "10.30.0.0/24", index: 1, first: "10.30.0.16", last: "10.30.0.31"},
		{subnet: "10.30.0.0/24", index: 15, first: "10.30.0.240", last: "10.30.0.254"},
		{subnet: "10.30.0.0/24", index: 16, err: "16 blocks"},
		{subnet: "10.30.0.0/16", index: 3, first: "10.30.3.0", last: "10.30.3.255"},
		{subnet: "10.30.0.0/16", index: 255, first: "10.30.255.0", last: "10.30.255.254"},
		{subnet: "10.30.0.0/20", index: 2, first: "10.30.0.32", last: "10.30.0.47"},
		{subnet: "10.30.0.0/28", index: 0, first: "10.30.0.1", last: "10.30.0.14"},
		{subnet: "10.30.0.0/28", index: 1, err: "1 blocks"},
		{subnet: "10.30.0.0/29", index: 0, err: "too small"},
		{subnet: "10.30.0.77/24", index: 1, first: "10.30.0.16", last: "10.30.0.31"},
		{subnet: "255.255.255.0/24", index: 15, first: "255.255.255.240", last: "255.255.255.254"},
		{subnet: "fd00:1::/64", index: 1, first: "fd00:1:0:0:100::", last: "fd00:1::1ff:ffff:ffff:ffff"},
		{subnet: "fd00:1::/120", index: 0, first: "fd00:1::1", last: "fd00:1::f"},
		{subnet: "ffff::/16", index: 255, first: "ffff:ff00::", last: "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"},
		{subnet: "10.30.0.0/24", index: -1, err: "none for node index -1"},
	} {
		t.Run(fmt.Sprintf("%s#%d", tc.subnet, tc.index), func(t *testing.T) {
			first, last, err := netspec.NodeBlock(netip.MustParsePrefix(tc.subnet), tc.index)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if first.String() != tc.first || last.String() != tc.last {
				t.Errorf("block %s-%s, want %s-%s", first, last, tc.first, tc.last)
			}
		})
	}
}

// Blocks of different nodes never share an address, and every block lies in
// its subnet: a property over random subnets of both families.
func TestNodeBlocksDisjoint(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		var subnet netip.Prefix
		if r.IntN(2) == 0 {
			var b [4]byte
			for i := range b {
				b[i] = byte(r.IntN(256))
			}
			subnet = netip.PrefixFrom(netip.AddrFrom4(b), 4+r.IntN(25)).Masked()
		} else {
			var b [16]byte
			for i := range b {
				b[i] = byte(r.IntN(256))
			}
			subnet = netip.PrefixFrom(netip.AddrFrom16(b), 8+r.IntN(117)).Masked()
		}
		var prevLast netip.Addr
		for index := 0; ; index++ {
			first, last, err := netspec.NodeBlock(subnet, index)
			if err != nil {
				if index == 0 {
					t.Fatalf("%s: no block 0: %v", subnet, err)
				}
				break
			}
			if !subnet.Contains(first) || !subnet.Contains(last) || last.Less(first) {
				t.Fatalf("%s block %d = %s-%s is not a range inside the subnet", subnet, index, first, last)
			}
			if prevLast.IsValid() && !prevLast.Less(first) {
				t.Fatalf("%s block %d starts at %s, at or before the previous block's end %s", subnet, index, first, prevLast)
			}
			prevLast = last
		}
	}
}

func TestCarveIPAM(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		index    int
		want     string
		err      string
	}{
		{name: "host-local ranges narrowed, other keys kept", index: 1,
			in:   `{"type":"host-local","ranges":[[{"subnet":"10.1.0.0/24","gateway":"10.1.0.1"}],[{"subnet":"fd00::/120"}]],"routes":[{"dst":"0.0.0.0/0"}]}`,
			want: `{"ranges":[[{"subnet":"10.1.0.0/24","rangeStart":"10.1.0.16","rangeEnd":"10.1.0.31","gateway":"10.1.0.1"}],[{"subnet":"fd00::/120","rangeStart":"fd00::10","rangeEnd":"fd00::1f"}]],"routes":[{"dst":"0.0.0.0/0"}],"type":"host-local"}`},
		{name: "intersected with the range's own bounds", index: 1,
			in:   `{"type":"host-local","ranges":[[{"subnet":"10.1.0.0/24","rangeStart":"10.1.0.20","rangeEnd":"10.1.0.200"}]]}`,
			want: `{"ranges":[[{"subnet":"10.1.0.0/24","rangeStart":"10.1.0.20","rangeEnd":"10.1.0.31"}]],"type":"host-local"}`},
		{name: "block outside the range's bounds", index: 0,
			in:  `{"type":"host-local","ranges":[[{"subnet":"10.1.0.0/24","rangeStart":"10.1.0.100"}]]}`,
			err: "ipam.ranges[0][0]: node index 0's block"},
		{name: "legacy subnet form", index: 0, in: `{"type":"host-local","subnet":"10.1.0.0/24"}`, err: "ipam.subnet"},
		{name: "static untouched", index: 3, in: `{"type":"static","addresses":[{"address":"10.1.0.5/24"}]}`,
			want: `{"type":"static","addresses":[{"address":"10.1.0.5/24"}]}`},
		{name: "no block for the node", index: 16, in: `{"type":"host-local","ranges":[[{"subnet":"10.1.0.0/24"}]]}`, err: "none for node index 16"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := netspec.CarveIPAM(json.RawMessage(tc.in), tc.index)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestPodNetworkParameters(t *testing.T) {
	node := &netspec.Node{Master: "ul-n2", Local: netip.MustParseAddr("10.252.0.2"), Index: 1,
		Peers: []netip.Addr{netip.MustParseAddr("10.252.0.3"), netip.MustParseAddr("fd00::1"), netip.MustParseAddr("10.252.0.1"), netip.MustParseAddr("10.252.0.3")}}
	const ipam = `"ipam":{"type":"host-local","ranges":[[{"subnet":"10.40.0.0/24"}]]}`
	for _, tc := range []struct {
		name, in string
		node     *netspec.Node
		want     string
		err      string
	}{
		{name: "vxlan left to the nodes: master, local, remotes, block", node: node,
			in:   `{"type":"netclass-vxlan","vni":300,` + ipam + `}`,
			want: `{"ipam":{"ranges":[[{"subnet":"10.40.0.0/24","rangeStart":"10.40.0.16","rangeEnd":"10.40.0.31"}]],"type":"host-local"},"local":"10.252.0.2","master":"ul-n2","remotes":["10.252.0.1","10.252.0.3"],"type":"netclass-vxlan","vni":300}`},
		{name: "vxlan validated by the controller: stand-in master, ranges as written",
			in:   `{"type":"netclass-vxlan","vni":300,` + ipam + `}`,
			want: `{"ipam":{"type":"host-local","ranges":[[{"subnet":"10.40.0.0/24"}]]},"master":"node-master","type":"netclass-vxlan","vni":300}`},
		{name: "vxlan with its own master and remotes: only the block", node: node,
			in:   `{"type":"netclass-vxlan","vni":300,"master":"eth1","remotes":["192.0.2.9"]}`,
			want: `{"master":"eth1","remotes":["192.0.2.9"],"type":"netclass-vxlan","vni":300}`},
		{name: "vxlan with a group: no remotes added", node: node,
			in:   `{"type":"netclass-vxlan","vni":300,"group":"239.1.1.1"}`,
			want: `{"group":"239.1.1.1","local":"10.252.0.2","master":"ul-n2","type":"netclass-vxlan","vni":300}`},
		{name: "vlan without master", node: node,
			in:   `{"type":"netclass-vlan","vlanId":7}`,
			want: `{"master":"ul-n2","type":"netclass-vlan","vlanId":7}`},
		{name: "bridge is node-local: never carved", node: node,
			in:   `{"type":"netclass-bridge","bridge":"b0",` + ipam + `}`,
			want: `{"bridge":"b0","ipam":{"type":"host-local","ranges":[[{"subnet":"10.40.0.0/24"}]]},"type":"netclass-bridge"}`},
		{name: "node without an index", node: &netspec.Node{Master: "ul-n2", Index: -1},
			in: `{"type":"netclass-vlan","vlanId":7,` + ipam + `}`, err: "no node index"},
		{name: "subnet too small for the controller's check",
			in: `{"type":"netclass-vlan","vlanId":7,"ipam":{"type":"host-local","ranges":[[{"subnet":"10.40.0.0/30"}]]}}`, err: "too small"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := netspec.PodNetworkParameters(json.RawMessage(tc.in), tc.node)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}
