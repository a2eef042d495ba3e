package demo

import (
	"strings"
	"testing"
)

func TestDefaultScenarioIsValid(t *testing.T) {
	s, err := Parse(Default())
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Pods) == 0 || len(s.Checks.Reach) == 0 || len(s.Checks.DSCP) == 0 || len(s.Checks.Rate) == 0 {
		t.Fatalf("the default scenario must exercise reachability, DSCP and rates: %+v", s.Checks)
	}
}

func TestParseReportsEveryProblem(t *testing.T) {
	_, err := Parse([]byte(`{"underlay":["x"],"nodes":["n1","n2"],
		"networks":[{"name":"a","plugin":{"type":"netclass-vxlan","vni":0}}],
		"pods":[{"name":"p","node":"n9","network":"zz","address":"1.2.3.4","qos":{"dscp":70}}],
		"checks":{"reach":[{"from":"p","to":"q"}],"rate":[{"from":"p","to":"p","protocol":"ICMP"}]}}`))
	if err == nil {
		t.Fatal("Parse accepted a broken scenario")
	}
	for _, want := range []string{
		"underlay: needs one address per node", `underlay[0]: not an address`, "networks[0].plugin: ",
		`pods[0].node: no node "n9"`, `pods[0].network: no network "zz"`, `pods[0].address: not an address`,
		"pods[0].qos.dscp", `checks.reach[0]: no pod "q"`, "checks.rate[0].protocol", "checks.rate[0].expectBps",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

// FuzzParse: no scenario makes Parse panic, and whatever it accepts is
// internally consistent (every pod's node and network exist).
func FuzzParse(f *testing.F) {
	f.Add(Default())
	f.Add([]byte(`{"underlay":["10.0.0.1/24"],"nodes":["n"],"networks":[{"name":"a","plugin":{"type":"netclass-bridge"}}],"pods":[{"name":"p","node":"n","network":"a"}]}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse(data)
		if err != nil {
			return
		}
		nodes, nets := map[string]bool{}, map[string]bool{}
		for _, n := range s.Nodes {
			nodes[n] = true
		}
		for _, n := range s.Networks {
			nets[n.Name] = true
		}
		for _, p := range s.Pods {
			if !nodes[p.Node] || !nets[p.Network] {
				t.Fatalf("accepted pod %+v with an unknown node or network", p)
			}
		}
	})
}
