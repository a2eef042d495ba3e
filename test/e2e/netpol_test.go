//go:build testbed

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/netclass-dev/netclass/api/contract"
	"github.com/netclass-dev/netclass/plugins/kernel/nft"
	"github.com/netclass-dev/netclass/test/e2e/harness"
	"github.com/netclass-dev/netclass/test/e2e/policyeval"
	"github.com/netclass-dev/netclass/test/testbed"
)

type polScenario struct {
	name     string
	policies []*networkingv1.NetworkPolicy
}

// NetworkPolicies labelled for netclass isolate pods on their netclass
// attachment, on two nodes, in place on running pods. For each scenario
// every (client, server, port, protocol) pair is probed over net1 and
// compared with policyeval's verdict, computed from the policy objects
// alone; TCP over the primary interface is compared with its reachability
// without any policy (never filtered). Before the probes, each node's
// agent must show (/debug/attachments) that its last sync applied, to each
// pod's net1, exactly the policies policyeval says select it; and each
// scenario must change a verdict or such a list (the previous state never
// passes for the next). The time from the write to the first probe
// showing the change is logged.
func TestNetworkPolicyTruthTable(t *testing.T) {
	e := harness.Shared(t)
	b := newPolBed(t, e)
	effects := truthTable(t, e, b, truthScenarios(b),
		func(sc polScenario) time.Time { return b.apply(t, e, sc.policies) },
		func(what string) { b.waitAgents(t, e, what) })
	unenforceable(t, e, b)
	fromTheFirstPacket(t, e, b)
	logEffects(t, effects)
}

// truthTable runs the scenarios in order: write puts a scenario's policies
// on the bed (in the kind under test) and makes them the oracle's world
// (b.world), agents waits until the nodes' agents show that they applied
// them; then every probe must give policyeval's verdict. It returns the
// time each scenario took to change a verdict, from its write. A failure
// logs the nodes' policy tables as it left them.
func truthTable(t *testing.T, e *harness.Env, b *polBed, scenarios []polScenario, write func(polScenario) time.Time, agents func(what string)) []time.Duration {
	t.Helper()
	e.TablesOnFailure(t, "inet "+nft.HostPolicyTable, "bridge "+nft.HostPolicyTable, "bridge "+nft.GuardTable)
	probes := b.probes()
	var baseline map[string]bool
	var effects []time.Duration
	for i, sc := range scenarios {
		before := b.world
		written := write(sc)
		changed, verdict, ok := firstChange(probes, before, b)
		if i > 0 && !ok && !b.selectionChanges(before) {
			t.Fatalf("%s: changes no verdict and no pod's policies: nothing would tell the state it makes from the one before", sc.name)
		}
		if ok {
			d := effect(t, changed, verdict, written)
			effects = append(effects, d)
			t.Logf("%-45s in effect after %v (%s open=%v)", sc.name, d.Round(time.Millisecond), changed, verdict)
		}
		agents(sc.name)
		testbed.Poll(t, testbed.Context(t, liveTimeout), 100*time.Millisecond, sc.name+": every probe as policyeval says",
			func(ctx context.Context) (bool, string, error) {
				got := runAll(t, probes)
				if i == 0 {
					baseline = primaryBaseline(t, probes, got)
				}
				var wrong []string
				for j, p := range probes {
					if want := b.expect(p, baseline); got[j] != want {
						wrong = append(wrong, fmt.Sprintf("%s: open=%v, want %v", p, got[j], want))
					}
				}
				return len(wrong) == 0, strings.Join(wrong, "; "), nil
			})
	}
	return effects
}

// logEffects logs the median and the longest of the effect times; the
// median is returned.
func logEffects(t *testing.T, effects []time.Duration) time.Duration {
	t.Helper()
	if len(effects) == 0 {
		t.Fatal("no scenario changed a verdict: no effect time measured")
	}
	slices.Sort(effects)
	median := effects[len(effects)/2]
	t.Logf("effect of %d policy changes on running pods: median %v, max %v", len(effects),
		median.Round(time.Millisecond), effects[len(effects)-1].Round(time.Millisecond))
	return median
}

// primaryBaseline records which pairs reach each other over the primary
// interface with no policy; at least one must, or the "unchanged" check
// would check nothing.
func primaryBaseline(t *testing.T, probes []polProbe, got []bool) map[string]bool {
	t.Helper()
	out, any := map[string]bool{}, false
	for i, p := range probes {
		if p.primary {
			out[p.String()], any = got[i], any || got[i]
		}
	}
	if !any {
		t.Fatal("no pair of pods reaches another over the primary interface: the primary check would be empty")
	}
	return out
}

// firstChange picks a probe whose verdict the scenario changes (TCP first:
// its answers are the quickest), with the new verdict.
func firstChange(probes []polProbe, before policyeval.World, b *polBed) (polProbe, bool, bool) {
	var found *polProbe
	var verdict bool
	for _, p := range probes {
		if p.primary {
			continue
		}
		was := before.Allowed(p.src.eval, p.dst.eval, p.proto, int32(p.port))
		now := b.world.Allowed(p.src.eval, p.dst.eval, p.proto, int32(p.port))
		if was != now && (found == nil || (found.proto != corev1.ProtocolTCP && p.proto == corev1.ProtocolTCP)) {
			found, verdict = &p, now
		}
	}
	if found == nil {
		return polProbe{}, false, false
	}
	return *found, verdict, true
}

// truthScenarios are the table's rows, in order: a policy named in two
// consecutive rows is updated in place (its label, its annotation). A row
// that makes a policy ignored follows one where it is enforced, so the
// agents' lists of the pods' policies change (and the verdicts too).
func truthScenarios(b *polBed) []polScenario {
	a, bb := b.nsA, b.nsB
	onWeb := map[string]string{"app": "web"}
	onClient := map[string]string{"app": "client"}
	deny := np(a, "deny", nil, ingressOnly)
	return []polScenario{
		{"no policy", nil},
		{"default-deny ingress", pols(deny)},
		{"the same policy unlabelled: ignored", pols(with(deny, unlabelled))},
		{"labelled for netclass again", pols(deny)},
		{"labelled for another controller: ignored", pols(with(deny, controller("other.example.com")))},
		{"labelled for netclass again", pols(deny)},
		{"labelled none: ignored", pols(with(deny, controller("none")))},
		{"labelled for netclass again", pols(deny)},
		{"scoped by annotation to another network: ignored", pols(with(deny, scoped("elsewhere, "+a+"/"+b.network)))},
		{"scoped by annotation to this network", pols(with(deny, scoped("elsewhere, "+b.network)))},
		{"default-deny egress", pols(np(a, "deny-egress", onClient, egressOnly))},
		{"ingress from a podSelector", pols(np(a, "web", onWeb, from(peer(nil, sel("app", "client")))))},
		{"ingress from a namespaceSelector", pols(np(a, "web", onWeb, from(peer(sel("team", "b"), nil))))},
		{"ingress from both selectors in one peer", pols(np(a, "web", onWeb, from(peer(sel("team", "b"), sel("app", "client")))))},
		{"ipBlock with except", pols(np(a, "web", onWeb, from(networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{
			CIDR: b.subnet, Except: []string{b.pods[2].eval.Addr.String() + "/32"}}})))},
		{"a numbered port", pols(np(a, "web", onWeb, ports(port(corev1.ProtocolTCP, intstr.FromInt32(80), nil))))},
		{"a named port", pols(np(a, "web", onWeb, ports(port(corev1.ProtocolTCP, intstr.FromString("http"), nil))))},
		{"an endPort range", pols(np(a, "web", onWeb, ports(port(corev1.ProtocolTCP, intstr.FromInt32(9000), ptr.To(int32(9010))))))},
		{"UDP and SCTP ports", pols(np(a, "web", onWeb, ports(port(corev1.ProtocolUDP, intstr.FromInt32(53), nil),
			port(corev1.ProtocolSCTP, intstr.FromInt32(7777), nil))))},
		{"egress to a podSelector on a port", pols(np(a, "client-out", onClient, egressOnly, to(peer(nil, sel("app", "web")),
			port(corev1.ProtocolTCP, intstr.FromInt32(8080), nil))))},
		{"egress to a named port: each destination's own", pols(np(a, "client-out", onClient, egressOnly,
			to(peer(sel("team", "b"), nil), port(corev1.ProtocolTCP, intstr.FromString("http"), nil)),
			to(peer(nil, sel("app", "web")), port(corev1.ProtocolTCP, intstr.FromString("http"), nil))))},
		{"the union of two policies", pols(
			np(a, "web", onWeb, fromOn(peer(nil, sel("app", "client")), port(corev1.ProtocolTCP, intstr.FromInt32(80), nil))),
			np(a, "web-b", onWeb, fromOn(peer(sel("team", "b"), nil), port(corev1.ProtocolUDP, intstr.FromInt32(53), nil))))},
		{"both namespaces isolated, each open to team a", pols(
			np(a, "all", nil, from(peer(sel("team", "a"), nil))),
			np(bb, "all", nil, bothWays, from(peer(sel("team", "a"), nil)), to(peer(sel("team", "a"), nil))))},
		{"no policy again", nil},
	}
}

// unenforceable: a rule netclass cannot compile (a named port to an
// ipBlock: no pod to name it) is left out, so what it allows stays closed,
// and the policy gets a Warning Event naming the pod and its node.
func unenforceable(t *testing.T, e *harness.Env, b *polBed) {
	t.Helper()
	client, web := b.pods[1], b.pods[0]
	b.apply(t, e, pols(np(b.nsA, "named-egress", map[string]string{"app": "client"}, egressOnly,
		to(networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: b.subnet}}, port(corev1.ProtocolTCP, intstr.FromString("http"), nil)))))
	testbed.Poll(t, testbed.Context(t, liveTimeout), 250*time.Millisecond, "a NotEnforced Event on the policy",
		func(ctx context.Context) (bool, string, error) {
			evs, err := e.Kube.CoreV1().Events(b.nsA).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=named-egress"})
			if err != nil {
				return false, "", err
			}
			var seen []string
			for _, ev := range evs.Items {
				seen = append(seen, ev.Reason+": "+ev.Message)
				if ev.Type == corev1.EventTypeWarning && ev.Reason == contract.ReasonPolicyNotEnforced &&
					strings.Contains(ev.Message, client.String()) && strings.Contains(ev.Message, client.node.Name) {
					return true, "", nil
				}
			}
			return false, strings.Join(seen, "; "), nil
		})
	p := polProbe{src: client, dst: web, proto: corev1.ProtocolTCP, port: 8080}
	testbed.Poll(t, testbed.Context(t, liveTimeout), 100*time.Millisecond, p.String()+" closed", func(context.Context) (bool, string, error) {
		return !p.run(t), "", nil
	})
}

// fromTheFirstPacket: a pod a policy isolates is closed from its first
// packet. The new pod's container connects to the web server over net1 as
// the first thing it does and records the answer; the egress-deny policy
// was there before the pod, so netclass-dra installs it right after the
// pod's ADD, before the container starts (not at the agent's next sync,
// 0.25 s or more later).
func fromTheFirstPacket(t *testing.T, e *harness.Env, b *polBed) {
	t.Helper()
	web := b.pods[0]
	b.apply(t, e, pols(np(b.nsA, "late-deny", map[string]string{"app": "late"}, egressOnly)))
	late := harness.PodOn(web.node.Name, b.nsA, "late", "net")
	late.Labels = map[string]string{"app": "late"}
	late.Spec.Containers[0].Command = firstConnectionCommand(web.eval.Addr.String())
	e.RunPods(t, late)
	if first := firstConnection(t, e, b.nsA, "late"); first != "closed" {
		t.Errorf("the first connection of a pod whose egress a policy denies was %s", first)
	}
	// the same connection once the policy is gone: open (the probe works)
	b.apply(t, e, nil)
	waitConnects(t, e, b.nsA, "late", web.eval.Addr.String())
}

// firstConnectionCommand is a container's command that connects to addr:80
// as the first thing it does and records in /tmp/first whether it was
// answered ("open") or not ("closed"), then sleeps.
func firstConnectionCommand(addr string) []string {
	return []string{"sh", "-c", fmt.Sprintf(
		"if nc -w 2 %s 80 </dev/null; then echo open; else echo closed; fi >/tmp/first; exec sleep 3600", addr)}
}

// firstConnection waits for what the pod's first connection recorded
// (firstConnectionCommand).
func firstConnection(t *testing.T, e *harness.Env, ns, pod string) string {
	t.Helper()
	var first string
	testbed.Poll(t, testbed.Context(t, liveTimeout), 250*time.Millisecond, "the "+pod+" pod's first connection answered or not",
		func(ctx context.Context) (bool, string, error) {
			out, stderr, err := testbed.Exec(ctx, e.Rest, ns, pod, "main", "cat", "/tmp/first")
			first = strings.TrimSpace(out)
			return err == nil && first != "", stderr, nil
		})
	return first
}

// waitConnects waits until the pod's connection to addr:80 is answered.
func waitConnects(t *testing.T, e *harness.Env, ns, pod, addr string) {
	t.Helper()
	testbed.Poll(t, testbed.Context(t, liveTimeout), 250*time.Millisecond, "the "+pod+" pod's connection to "+addr+" answered",
		func(ctx context.Context) (bool, string, error) {
			out, stderr, err := testbed.Exec(ctx, e.Rest, ns, pod, "main", "nc", "-w", "2", addr, "80")
			return err == nil, out + stderr, nil
		})
}
