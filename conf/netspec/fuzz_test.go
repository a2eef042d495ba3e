package netspec_test

import (
	"encoding/json"
	"net/netip"
	"strings"
	"testing"

	"github.com/netclass-dev/netclass/conf/netspec"
)

// FuzzTenantIPAM: whatever a tenant writes, TenantIPAM never panics, and what it
// accepts runs the ClusterNetwork's IPAM type with nothing but the allowed keys.
func FuzzTenantIPAM(f *testing.F) {
	for _, s := range []struct{ cluster, tenant string }{
		{`{"type":"host-local","ranges":[[{"subnet":"10.0.0.0/16"}]]}`, `{"ranges":[[{"subnet":"10.0.1.0/24"}]]}`},
		{`{"type":"host-local"}`, `{"dataDir":"/etc"}`},
		{`{"type":"static"}`, `{"addresses":[{"address":"10.0.0.5/24","gateway":"10.0.0.1"}],"routes":[{"dst":"0.0.0.0/0"}]}`},
		{`{"type":"dhcp"}`, `{"type":"dhcp","daemonSocketPath":"/x"}`},
		{``, `{"type":"host-local"}`},
		{`{"type":"host-local"}`, `{"Type":"whereabouts","ranges":null}`},
		{`{"type":"host-local"}`, `null`},
	} {
		f.Add(s.cluster, s.tenant)
	}
	allowed := map[string]map[string]bool{
		"host-local": {"type": true, "ranges": true, "routes": true},
		"static":     {"type": true, "addresses": true, "routes": true},
		"dhcp":       {"type": true},
	}
	f.Fuzz(func(t *testing.T, cluster, tenant string) {
		got, err := netspec.TenantIPAM([]byte(cluster), []byte(tenant))
		if t := strings.TrimSpace(tenant); err != nil || t == "" || t == "null" {
			return // rejected, or the ClusterNetwork's own ipam (an admin's)
		}
		typ, _ := got["type"].(string)
		keys, ok := allowed[typ]
		if !ok {
			t.Fatalf("accepted a tenant ipam of type %q: %v", typ, got)
		}
		for k := range got {
			if !keys[k] {
				t.Fatalf("accepted key %q for %s: %v", k, typ, got)
			}
		}
	})
}

// FuzzCarveIPAM: whatever the IPAM block holds, carving never panics, and a
// carved host-local range always lies inside its subnet.
func FuzzCarveIPAM(f *testing.F) {
	f.Add(`{"type":"host-local","ranges":[[{"subnet":"10.1.0.0/24","gateway":"10.1.0.1"}]]}`, 1)
	f.Add(`{"type":"host-local","ranges":[[{"subnet":"fd00::/64","rangeStart":"fd00::5"}]]}`, 200)
	f.Add(`{"type":"host-local","ranges":[[{"subnet":"10.1.0.0/30"}]]}`, 0)
	f.Add(`{"type":"host-local","subnet":"10.1.0.0/24"}`, 0)
	f.Add(`{"type":"dhcp"}`, 3)
	f.Add(`[1,2]`, 0)
	f.Fuzz(func(t *testing.T, ipam string, index int) {
		out, err := netspec.CarveIPAM(json.RawMessage(ipam), index)
		if err != nil {
			return
		}
		var obj struct {
			Type   string `json:"type"`
			Ranges [][]struct {
				Subnet, RangeStart, RangeEnd string
			} `json:"ranges"`
		}
		if json.Unmarshal(out, &obj) != nil || obj.Type != "host-local" {
			return
		}
		for _, set := range obj.Ranges {
			for _, r := range set {
				p, err1 := netip.ParsePrefix(r.Subnet)
				s, err2 := netip.ParseAddr(r.RangeStart)
				e, err3 := netip.ParseAddr(r.RangeEnd)
				if err1 != nil || err2 != nil || err3 != nil || !p.Contains(s) || !p.Contains(e) || e.Less(s) {
					t.Fatalf("carved range %+v is not a range inside its subnet (from %s)", r, ipam)
				}
			}
		}
	})
}

// FuzzPodNetworkParameters: the node's completion of any parameters never panics.
func FuzzPodNetworkParameters(f *testing.F) {
	f.Add(`{"type":"netclass-vxlan","vni":300,"ipam":{"type":"host-local","ranges":[[{"subnet":"10.40.0.0/24"}]]}}`, true)
	f.Add(`{"type":"netclass-vlan","vlanId":7}`, false)
	f.Add(`{"type":"netclass-vxlan","master":null,"remotes":[]}`, true)
	f.Add(`null`, true)
	f.Fuzz(func(t *testing.T, params string, onNode bool) {
		var node *netspec.Node
		if onNode {
			node = &netspec.Node{Master: "ul0", Local: netip.MustParseAddr("10.0.0.1"), Peers: []netip.Addr{netip.MustParseAddr("10.0.0.2")}, Index: 1}
		}
		_, _ = netspec.PodNetworkParameters(json.RawMessage(params), node)
	})
}
