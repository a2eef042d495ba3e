//go:build testbed

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	mnpclient "github.com/k8snetworkplumbingwg/multi-networkpolicy/pkg/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/netclass-dev/netclass/api/contract"
	"github.com/netclass-dev/netclass/test/e2e/harness"
	"github.com/netclass-dev/netclass/test/e2e/policyeval"
	"github.com/netclass-dev/netclass/test/repo"
	"github.com/netclass-dev/netclass/test/testbed"
)

// A real primary policy engine beside netclass: kube-network-policies
// (scripts/testbed/knp.sh) on both nodes enforces NetworkPolicies on the
// pods' eth0 while netclass-dra enforces its objects on net1. Every row of
// the truth table (truthScenarios, read as they are) this bed can show on
// eth0 (rows) is written the ways its policies allow — (a) unlabelled
// NetworkPolicies, (c) NetworkPolicies labelled for netclass, (b)
// MultiNetworkPolicies naming the network; or, for a row whose policies
// netclass ignores (no label, another controller, "none", scoped to
// another network), (d) as written — and followed by "no policy"; every
// pair of pods is probed over eth0 (pod IPs) and over net1 on TCP 80, TCP
// 8080, UDP 53 and SCTP 7777. net1 is compared with policyeval on the
// objects as written (netclass's semantics); eth0 with policyeval on every
// NetworkPolicy as if labelled (what an engine that ignores the label
// enforces), on the pods' primary IPs, within what reaches without any
// policy. Before the probes the oracle must say that the row changes what
// its kind claims: (a) and (d) eth0 only, (b) net1 only, (c) both (the
// hazard). About two minutes on this machine.
func TestPrimaryEngineBesideNetclass(t *testing.T) {
	e := harness.Shared(t)
	primaryEngine(t)
	b := newPolBed(t, e)
	mc, err := mnpclient.NewForConfig(e.Rest)
	if err != nil {
		t.Fatal(err)
	}
	pb := &primaryBed{polBed: b, e: e, multi: mc, multiWritten: map[string]bool{}}
	pb.probes = pb.allProbes()
	pb.baseline(t)
	measured := map[string][2]int{}
	for _, row := range pb.rows(t) {
		for _, v := range row {
			closed := pb.step(t, v)
			sum := measured[v.kind]
			measured[v.kind] = [2]int{sum[0] + closed[0], sum[1] + closed[1]}
		}
		pb.step(t, primaryVariant{name: "no policy", kind: kindNone})
	}
	for _, k := range []string{kindUnlabelled, kindLabelled, kindMulti, kindIgnored} {
		t.Logf("%-42s probes closed by it, summed over the rows: eth0 %d, net1 %d", k, measured[k][0], measured[k][1])
	}
	if len(pb.differed) > 0 { // said again last: a long log may be cut in its middle
		t.Errorf("%d rows' confirming rounds differed:\n%s", len(pb.differed), strings.Join(pb.differed, "\n"))
	}
}

const (
	kindNone       = "no policy"
	kindUnlabelled = "(a) unlabelled NetworkPolicy"
	kindLabelled   = "(c) labelled NetworkPolicy"
	kindMulti      = "(b) MultiNetworkPolicy"
	kindIgnored    = "(d) NetworkPolicy netclass ignores"
)

// primaryVariant is one row: the policies of a scenario written as one kind.
type primaryVariant struct {
	name, kind string
	pols       []*networkingv1.NetworkPolicy
}

// rows are the truth table's rows this bed can show on both interfaces,
// each written the ways its policies allow: policies netclass enforces
// (labelled, on this network) as (a) unlabelled, (c) as written and (b)
// MultiNetworkPolicies, when the unlabelled form closes some eth0 probe
// open with no policy; policies netclass ignores (unlabelled, another
// controller's, "none", scoped to another network) as written, (d), when
// they close some eth0 probe. A row is chosen by the oracle before it is
// written; each row the bed cannot show is logged with why (over eth0 only
// pods of one node reach each other: the bed's node 1 does not forward).
func (pb *primaryBed) rows(t *testing.T) [][]primaryVariant {
	t.Helper()
	var out [][]primaryVariant
	seen := map[string]bool{}
	for _, sc := range truthScenarios(pb.polBed) {
		key, err := json.Marshal(sc.policies)
		if err != nil {
			t.Fatal(err)
		}
		if len(sc.policies) == 0 || seen[string(key)] {
			continue
		}
		seen[string(key)] = true
		as := pb.closes(primaryVariant{name: sc.name, kind: kindLabelled, pols: sc.policies})
		vs := variants(sc)
		if as[1] == 0 {
			vs = []primaryVariant{{sc.name, kindIgnored, sc.policies}}
		}
		if pb.closes(vs[0])[0] == 0 {
			t.Logf("%-50s not shown here: closes no probe between pods of one node over eth0", sc.name)
			continue
		}
		out = append(out, vs)
	}
	if len(out) < 10 {
		t.Fatalf("only %d rows of the truth table would show anything over eth0 on this bed", len(out))
	}
	return out
}

// closes counts the probes the oracle closes for a variant over eth0 (of
// those open with no policy) and over net1, without writing anything.
func (pb *primaryBed) closes(v primaryVariant) [2]int {
	saved, primary := pb.world.Policies, pb.primary
	defer func() { pb.world.Policies, pb.primary = saved, primary }()
	pb.world.Policies, pb.primary = v.pols, v.pols
	if v.kind == kindMulti {
		pb.primary = nil
	}
	var closed [2]int
	for i, ok := range pb.expected() {
		switch p := pb.probes[i]; {
		case p.primary && pb.open[p.String()] && !ok:
			closed[0]++
		case !p.primary && !ok:
			closed[1]++
		}
	}
	return closed
}

// variants: the scenario unlabelled, labelled (as truthScenarios writes
// it), and as MultiNetworkPolicies (asMulti: policy-for names the network).
func variants(sc polScenario) []primaryVariant {
	var plain []*networkingv1.NetworkPolicy
	for _, p := range sc.policies {
		plain = append(plain, with(p, unlabelled))
	}
	return []primaryVariant{{sc.name, kindUnlabelled, plain}, {sc.name, kindLabelled, sc.policies}, {sc.name, kindMulti, sc.policies}}
}

// primaryEngine makes sure kube-network-policies runs on every node: the
// bed's own when up.sh started it (left running), else started here and
// stopped (SIGINT) at the end. It fails, never skips, when it cannot.
func primaryEngine(t *testing.T) {
	t.Helper()
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(root, "scripts", "testbed", "knp.sh")
	if exec.Command("bash", script, "status").Run() == nil {
		t.Log("kube-network-policies already runs on every node (the bed's)")
		return
	}
	start := time.Now()
	if out, err := exec.Command("bash", script, "start").CombinedOutput(); err != nil {
		t.Fatalf("start kube-network-policies (%s start): %v\n%s", script, err, out)
	}
	t.Logf("kube-network-policies started on every node in %v", time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		if out, err := exec.Command("bash", script, "stop").CombinedOutput(); err != nil {
			t.Errorf("stop kube-network-policies: %v\n%s", err, out)
		}
	})
}

// primaryBed is the truth table's bed with MultiNetworkPolicies and the
// eth0 view.
type primaryBed struct {
	*polBed
	e            *harness.Env
	multi        mnpclient.Interface
	multiWritten map[string]bool
	probes       []polProbe
	// open: with no policy, the probes that answered (eth0's reach).
	open map[string]bool
	// primary: the NetworkPolicies on the API server, whatever their label.
	primary []*networkingv1.NetworkPolicy
	// differed: the rows whose confirming round differed, and how.
	differed []string
}

var primaryPorts = []struct {
	proto corev1.Protocol
	port  int
}{{corev1.ProtocolTCP, 80}, {corev1.ProtocolTCP, 8080}, {corev1.ProtocolUDP, 53}, {corev1.ProtocolSCTP, 7777}}

// allProbes: every ordered pair, every port, over net1 and over eth0.
func (pb *primaryBed) allProbes() []polProbe {
	var out []polProbe
	for _, src := range pb.pods {
		for _, dst := range pb.pods {
			for _, p := range primaryPorts {
				if src != dst {
					out = append(out, polProbe{src: src, dst: dst, proto: p.proto, port: p.port},
						polProbe{src: src, dst: dst, proto: p.proto, port: p.port, primary: true})
				}
			}
		}
	}
	return out
}

// baseline: with no policy every probe over net1 answers; the eth0 probes
// that answer are the reach eth0 verdicts are taken within (pods of one
// node: at least one pair on each node, or eth0 would show nothing there).
func (pb *primaryBed) baseline(t *testing.T) {
	t.Helper()
	pb.write(t, primaryVariant{name: "no policy", kind: kindNone})
	pb.waitAgents(t, "no policy", false)
	var got []bool
	testbed.Poll(t, testbed.Context(t, liveTimeout), 100*time.Millisecond, "with no policy, every probe over net1 open",
		func(context.Context) (bool, string, error) {
			got = runAll(t, pb.probes)
			var closed []string
			for i, p := range pb.probes {
				if !p.primary && !got[i] {
					closed = append(closed, p.String())
				}
			}
			return len(closed) == 0, strings.Join(closed, "; "), nil
		})
	pb.open = map[string]bool{}
	reach := map[string]int{}
	for i, p := range pb.probes {
		if p.primary && got[i] {
			pb.open[p.String()] = true
			if p.src.node.Name == p.dst.node.Name {
				reach[p.src.node.Name]++
			}
		}
	}
	for _, n := range []string{pb.pods[0].node.Name, pb.pods[1].node.Name} {
		if reach[n] == 0 {
			t.Fatalf("no two pods of node %s reach each other over eth0 without a policy: eth0 would show nothing there", n)
		}
	}
	t.Logf("no policy: %d of %d probes over eth0 answer (same-node ones by node: %v)", len(pb.open), len(pb.probes)/2, reach)
}

// step writes a row, waits until both nodes' netclass agents applied it,
// checks what the oracle says it changes against its kind's claim, then
// probes until every probe gives the oracle's verdict, and once more. It
// returns how many probes the row closes over eth0 and over net1.
func (pb *primaryBed) step(t *testing.T, v primaryVariant) [2]int {
	t.Helper()
	what := v.kind + ": " + v.name
	pb.write(t, v)
	written := time.Now()
	pb.waitAgents(t, what, v.kind == kindMulti)
	want := pb.expected()
	closed := pb.claim(t, what, v.kind, want)
	testbed.Poll(t, testbed.Context(t, liveTimeout), 100*time.Millisecond, what+": every probe as policyeval says",
		func(context.Context) (bool, string, error) {
			wrong := pb.wrong(t, want)
			return len(wrong) == 0, strings.Join(wrong, "; "), nil
		})
	took := time.Since(written)
	if wrong := pb.wrong(t, want); len(wrong) > 0 {
		pb.differed = append(pb.differed, fmt.Sprintf("%s: %s", what, strings.Join(wrong, "; ")))
		t.Errorf("%s: the next round of probes differs: %s", what, strings.Join(wrong, "; "))
	}
	t.Logf("%-82s closes eth0 %d, net1 %d: every probe as the oracle says in the round ended %v after the write (a round waits 1 s for the closed ones)",
		what, closed[0], closed[1], took.Round(time.Millisecond))
	return closed
}

// claim counts the probes the oracle closes (over eth0 among those open
// with no policy) and fails unless the row changes what its kind claims.
func (pb *primaryBed) claim(t *testing.T, what, kind string, want []bool) [2]int {
	t.Helper()
	var closed [2]int
	for i, p := range pb.probes {
		switch {
		case p.primary && pb.open[p.String()] && !want[i]:
			closed[0]++
		case !p.primary && !want[i]:
			closed[1]++
		}
	}
	claims := map[string][2]bool{kindNone: {false, false}, kindUnlabelled: {true, false}, kindLabelled: {true, true}, kindMulti: {false, true},
		kindIgnored: {true, false}}
	if c := claims[kind]; (closed[0] > 0) != c[0] || (closed[1] > 0) != c[1] {
		t.Fatalf("%s: policyeval closes %d probes over eth0 and %d over net1; the row would not show what %q claims (eth0 %v, net1 %v)",
			what, closed[0], closed[1], kind, c[0], c[1])
	}
	return closed
}

// expected is each probe's verdict: over net1 policyeval's on the objects
// as written; over eth0 its verdict on every NetworkPolicy (the label and
// the scoping annotation ignored, as a primary engine that does not know
// them does) on the pods' primary IPs, within eth0's reach.
func (pb *primaryBed) expected() []bool {
	eth0 := policyeval.World{Namespaces: pb.world.Namespaces, Network: pb.world.Network}
	for _, p := range pb.primary {
		q := p.DeepCopy()
		q.Labels = map[string]string{contract.PolicyControllerLabel: contract.PolicyController}
		q.Annotations = nil
		eth0.Policies = append(eth0.Policies, q)
	}
	out := make([]bool, len(pb.probes))
	for i, p := range pb.probes {
		if p.primary {
			out[i] = pb.open[p.String()] && eth0.Allowed(onPrimary(p.src), onPrimary(p.dst), p.proto, int32(p.port))
		} else {
			out[i] = pb.world.Allowed(p.src.eval, p.dst.eval, p.proto, int32(p.port))
		}
	}
	return out
}

func onPrimary(p *polPod) policyeval.Pod {
	e := p.eval
	e.Addr = p.primary
	return e
}

// wrong probes everything once and lists what differs from want.
func (pb *primaryBed) wrong(t *testing.T, want []bool) []string {
	got := runAll(t, pb.probes)
	var out []string
	for i, p := range pb.probes {
		if got[i] != want[i] {
			out = append(out, fmt.Sprintf("%s: open=%v, want %v", p, got[i], want[i]))
		}
	}
	return out
}

// write makes the row's objects the only policies of the bed's namespaces
// (the other kind's deleted) and the oracle's world.
func (pb *primaryBed) write(t *testing.T, v primaryVariant) {
	t.Helper()
	if v.kind == kindMulti {
		pb.apply(t, pb.e, nil)
		pb.applyMulti(t, pb.multi, pb.multiWritten, v.pols)
		pb.primary = nil
		return
	}
	pb.applyMulti(t, pb.multi, pb.multiWritten, nil)
	pb.apply(t, pb.e, v.pols)
	pb.primary = v.pols
}

// waitAgents waits until each node's agent applied, to each pod's net1,
// the policies that select it in the oracle's world as the kind written
// (MultiNetworkPolicies or NetworkPolicies), and none of the other kind.
func (pb *primaryBed) waitAgents(t *testing.T, what string, multi bool) {
	t.Helper()
	sel, none := map[string]map[string][]string{}, map[string]map[string][]string{}
	for _, p := range pb.pods {
		if sel[p.node.Name] == nil {
			sel[p.node.Name], none[p.node.Name] = map[string][]string{}, map[string][]string{}
		}
		sel[p.node.Name][p.String()] = pb.world.Selecting(p.eval)
		none[p.node.Name][p.String()] = nil
	}
	nps, mnps := sel, none
	if multi {
		nps, mnps = none, sel
	}
	for node := range sel {
		d := pb.e.DRAOn(node)
		d.WaitAgent(t, what+": the NetworkPolicies applied to each pod", harness.AgentHas("net1", nps[node]))
		d.WaitAgent(t, what+": the MultiNetworkPolicies applied to each pod", harness.AgentHasMulti("net1", mnps[node]))
	}
}
