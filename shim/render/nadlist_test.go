package render

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestNADConfList(t *testing.T) {
	for _, c := range []struct {
		name     string
		extra    string
		static   bool
		agentDir string
		want     string
	}{
		{"defaults", "", false, "",
			`{"capabilities":{"bandwidth":true,"qos":true},"dataDir":"/var/lib/cni/netclass","portSecurity":{"spoofCheck":true}}`},
		{"static addresses allowed", "", true, "",
			`{"capabilities":{"bandwidth":true,"ips":true,"mac":true,"qos":true},"dataDir":"/var/lib/cni/netclass","portSecurity":{"spoofCheck":true}}`},
		{"the network's own dataDir is its claims': apart from them", `"dataDir":"/srv/x","qos":{"dscp":8},`, false, "",
			`{"capabilities":{"bandwidth":true,"qos":true},"dataDir":"/var/lib/cni/netclass","portSecurity":{"spoofCheck":true},"qos":{"dscp":8}}`},
		{"the agent covers the records: closed until it opens", "", false, "/var/lib/cni/netclass",
			`{"capabilities":{"bandwidth":true,"qos":true},"dataDir":"/var/lib/cni/netclass","portSecurity":{"spoofCheck":true,"startClosed":true}}`},
		{"a network's own dataDir, the agent's store: closed until it opens", `"dataDir":"/srv/x",`, false, "/var/lib/cni/netclass",
			`{"capabilities":{"bandwidth":true,"qos":true},"dataDir":"/var/lib/cni/netclass","portSecurity":{"spoofCheck":true,"startClosed":true}}`},
		{"the agent covers another store: open", "", false, "/srv/agent",
			`{"capabilities":{"bandwidth":true,"qos":true},"dataDir":"/var/lib/cni/netclass","portSecurity":{"spoofCheck":true}}`},
	} {
		n := bridgeNet(c.extra)
		n.AllowStaticAddresses = c.static
		b, err := NADConfList(n, c.agentDir)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var l list
		if err := json.Unmarshal(b, &l); err != nil || l.Name != "blue" || l.CNIVersion != "1.1.0" || len(l.Plugins) != 1 {
			t.Fatalf("%s: %s %v", c.name, b, err)
		}
		got := map[string]any{}
		for _, k := range []string{"capabilities", "dataDir", "portSecurity", "qos"} {
			if v, ok := l.Plugins[0][k]; ok {
				got[k] = v
			}
		}
		if g, _ := json.Marshal(got); string(g) != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, g, c.want)
		}
		ipam := l.Plugins[0]["ipam"].(map[string]any)
		if ipam["dataDir"] != IPAMStateDir {
			t.Errorf("%s: host-local dataDir %v, want the claims' %s", c.name, ipam["dataDir"], IPAMStateDir)
		}
	}
}

// A network whose config names the NADs' store as its dataDir gets no NAD
// list: its claims' records would share the store, and netclass-dra's CNI
// GC of its claims would tear down the NADs' attachments.
func TestNADConfListRefusesTheNADsStoreAsDataDir(t *testing.T) {
	_, err := NADConfList(bridgeNet(`"dataDir":"/var/lib/cni/netclass/",`), "")
	if err == nil || !strings.Contains(err.Error(), "dataDir /var/lib/cni/netclass/ is where the attachments of generated NADs keep their records") {
		t.Fatalf("error %v", err)
	}
}
