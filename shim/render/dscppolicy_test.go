package render

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/netclass-dev/netclass/api/contract"
	"github.com/netclass-dev/netclass/conf/qos"
)

// A network's DSCP policy stays with the plugin that owns the interface's
// QoS (the chained netclass-qos once NetworkQoS rules apply, never both),
// and a claim asking for a DSCP it leaves out is refused, naming the
// claim's field.
func TestConfListKeepsTheDSCPPolicy(t *testing.T) {
	policy := `"dscpPolicy":{"allowed":[{"first":0,"last":40}]},`
	net := bridgeNet(policy)
	net.DSCPPolicy = &qos.DSCPPolicy{Allowed: []qos.DSCPRange{{First: 0, Last: 40}}}

	l := decode(t, mustConfList(t, Input{Network: net}))
	if _, ok := l.Plugins[0]["dscpPolicy"]; !ok || len(l.Plugins) != 1 {
		t.Errorf("without rules the main plugin must carry the policy: %v", l.Plugins)
	}
	l = decode(t, mustConfList(t, Input{Network: net, Rules: []qos.Rule{{Priority: 1, DSCP: ptrInt(8)}}}))
	if len(l.Plugins) != 2 {
		t.Fatalf("plugins = %v, want the main one and netclass-qos", l.Plugins)
	}
	if _, ok := l.Plugins[0]["dscpPolicy"]; ok {
		t.Errorf("the main plugin keeps the policy next to netclass-qos: %v", l.Plugins[0])
	}
	got, _ := json.Marshal(l.Plugins[1]["dscpPolicy"])
	if string(got) != `{"allowed":[{"first":0,"last":40}]}` {
		t.Errorf("netclass-qos carries dscpPolicy %s", got)
	}

	_, err := ConfList(Input{Network: net, Config: &contract.AttachmentConfig{QoS: &qos.Spec{DSCP: ptrInt(46)}}})
	if err == nil || !strings.Contains(err.Error(), "qos.dscp: 46 is not allowed by dscpPolicy (allowed 0-40)") {
		t.Errorf("a claim marking EF under a policy allowing 0-40: %v, want it refused naming qos.dscp", err)
	}
}
