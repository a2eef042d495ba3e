package netspec_test

import (
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
