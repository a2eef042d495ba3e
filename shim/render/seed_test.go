package render

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/yaml"

	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/conf/qos"
	"github.com/netclass-dev/netclass/shim/network"
)

// The seed's examples as files (conf/crd/testdata), read unchanged, on a
// pod's primary interface: Story 1's objects select the default network
// and compile to one rule each on the pods they label, with the private
// ranges excepted; the IPv6 example compiles to an IPv6 rule.
func TestSeedExamplesOnTheDefaultNetwork(t *testing.T) {
	for _, c := range []struct {
		file, ns string
		labels   map[string]string
		want     string
	}{
		{"seed003-networkqos-story1.yaml", "games", map[string]string{"user-type": "paid"},
			`{"priority":20,"dscp":20,"classifier":{"to":[{"ipBlock":{"cidr":"0.0.0.0/0","except":["10.0.0.0/8","172.16.0.0/12","192.168.0.0/16"]}}]}}`},
		{"seed003-networkqos-story1.yaml", "games", map[string]string{"user-type": "free"},
			`{"priority":40,"dscp":11,"classifier":{"to":[{"ipBlock":{"cidr":"0.0.0.0/0","except":["10.0.0.0/8","172.16.0.0/12","192.168.0.0/16"]}}]}}`},
		{"seed003-networkqos-ipv6.yaml", "default", nil,
			`{"priority":60,"dscp":48,"classifier":{"to":[{"ipBlock":{"cidr":"2001:0db8:85a3:0000:0000:8a2e:0370:7330/124"}}]}}`},
	} {
		objs := seedFile(t, c.file)
		rules, selected, err := Rules(objs, Target{Namespace: c.ns, PodLabels: c.labels, Network: network.Default()}, nil)
		if err != nil || len(selected) != 1 || len(rules) != 1 {
			t.Fatalf("%s %v: rules %+v, selected %v, %v", c.file, c.labels, rules, selected, err)
		}
		if err := (&qos.Spec{Egress: rules}).Validate("qos"); err != nil {
			t.Errorf("%s %v: not a valid qos block: %v", c.file, c.labels, err)
		}
		if b, _ := json.Marshal(rules[0]); string(b) != c.want {
			t.Errorf("%s %v:\n got %s\nwant %s", c.file, c.labels, b, c.want)
		}
		if rules, _, _ := Rules(objs, Target{Namespace: c.ns, PodLabels: c.labels, Network: bridgeNet("")}, nil); len(rules) != 0 {
			t.Errorf("%s %v reaches a netclass attachment: %+v", c.file, c.labels, rules)
		}
	}
}

func seedFile(t *testing.T, file string) []*ncv1.NetworkQoS {
	t.Helper()
	b, err := os.ReadFile("../../conf/crd/testdata/" + file)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewYAMLOrJSONDecoder(strings.NewReader(string(b)), 4096)
	var out []*ncv1.NetworkQoS
	for {
		var q ncv1.NetworkQoS
		if err := dec.Decode(&q); err != nil {
			return out
		}
		out = append(out, &q)
	}
}
