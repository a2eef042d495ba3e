//go:build testbed

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	cnpv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"
	cnpclient "sigs.k8s.io/network-policy-api/pkg/client/clientset/versioned"

	"github.com/netclass-dev/netclass/api/contract"
	"github.com/netclass-dev/netclass/test/e2e/harness"
	"github.com/netclass-dev/netclass/test/testbed"
)

// ClusterNetworkPolicies labelled for netclass on the truth table's bed
// (two nodes, TCP, UDP and SCTP over net1), with and without labelled
// NetworkPolicies: every probe must give policyeval's verdict, computed
// from the objects alone; the agents must list, for each pod's net1, the
// ClusterNetworkPolicies policyeval says select it (and the
// NetworkPolicies); a change must be in effect within a second (median,
// measured as for NetworkPolicy). The policies' subjects and peers select
// the bed's two namespaces by a label of this run only (they are cluster
// scoped), and are deleted at the end. A rule netclass cannot enforce (over
// its bounds) gets a NotEnforced Event.
func TestClusterNetworkPolicyTruthTable(t *testing.T) {
	e := harness.Shared(t)
	b := newPolBed(t, e)
	c := newCNPBed(t, e, b)
	scenarios := c.scenarios()
	var rows []polScenario
	byName := map[string]cnpScenario{}
	for _, sc := range scenarios {
		rows = append(rows, polScenario{name: sc.name, policies: sc.policies})
		byName[sc.name] = sc
	}
	effects := truthTable(t, e, b, rows,
		func(sc polScenario) time.Time {
			c.write(t, byName[sc.name].cluster)
			b.world.Cluster = byName[sc.name].cluster
			return b.apply(t, e, sc.policies)
		},
		func(what string) {
			b.waitAgents(t, e, what)
			b.waitAgentsShowCluster(t, e, what)
		})
	if median := logEffects(t, effects); median > time.Second {
		t.Errorf("ClusterNetworkPolicy changes in effect after %v (median), want within 1s", median.Round(time.Millisecond))
	}
	c.notEnforced(t, e)
}

type cnpScenario struct {
	name     string
	cluster  []*cnpv1beta1.ClusterNetworkPolicy
	policies []*networkingv1.NetworkPolicy
}

// cnpBed is the truth table's bed with the ClusterNetworkPolicies written.
type cnpBed struct {
	*polBed
	client  cnpclient.Interface
	run     string
	written map[string]bool
}

// newCNPBed labels the bed's namespaces for this run (the policies'
// subjects and peers select them by it) and deletes the run's policies at
// the end.
func newCNPBed(t *testing.T, e *harness.Env, b *polBed) *cnpBed {
	run := harness.Unique(6)
	for ns, team := range map[string]string{b.nsA: "a", b.nsB: "b"} {
		labelNamespace(t, e, ns, map[string]string{"e2e-cnp": run})
		b.world.Namespaces[ns] = map[string]string{"team": team, "e2e-cnp": run}
	}
	client, err := cnpclient.NewForConfig(e.Rest)
	if err != nil {
		t.Fatal(err)
	}
	c := &cnpBed{polBed: b, client: client, run: run, written: map[string]bool{}}
	t.Cleanup(func() { c.write(t, nil) })
	return c
}

// ns selects the bed's namespaces with the labels (and the run's).
func (c *cnpBed) ns(kv ...string) *metav1.LabelSelector {
	s := &metav1.LabelSelector{MatchLabels: map[string]string{"e2e-cnp": c.run}}
	for i := 0; i+1 < len(kv); i += 2 {
		s.MatchLabels[kv[i]] = kv[i+1]
	}
	return s
}

// cnp is a ClusterNetworkPolicy labelled for netclass, named for the run.
func (c *cnpBed) cnp(name string, tier cnpv1beta1.Tier, prio int32, subject cnpv1beta1.ClusterNetworkPolicySubject, opts ...func(*cnpv1beta1.ClusterNetworkPolicy)) *cnpv1beta1.ClusterNetworkPolicy {
	p := &cnpv1beta1.ClusterNetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-" + c.run + "-" + name, Labels: map[string]string{contract.PolicyControllerLabel: contract.PolicyController}},
		Spec:       cnpv1beta1.ClusterNetworkPolicySpec{Tier: tier, Priority: prio, Subject: subject},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func (c *cnpBed) onNS(kv ...string) cnpv1beta1.ClusterNetworkPolicySubject {
	return cnpv1beta1.ClusterNetworkPolicySubject{Namespaces: c.ns(kv...)}
}

func (c *cnpBed) onPods(app string, kv ...string) cnpv1beta1.ClusterNetworkPolicySubject {
	return cnpv1beta1.ClusterNetworkPolicySubject{Pods: &cnpv1beta1.NamespacedPod{NamespaceSelector: *c.ns(kv...), PodSelector: *sel("app", app)}}
}

func (c *cnpBed) nsPeer(kv ...string) cnpv1beta1.ClusterNetworkPolicyEgressPeer {
	return cnpv1beta1.ClusterNetworkPolicyEgressPeer{Namespaces: c.ns(kv...)}
}

func (c *cnpBed) podPeer(app string, kv ...string) cnpv1beta1.ClusterNetworkPolicyEgressPeer {
	return cnpv1beta1.ClusterNetworkPolicyEgressPeer{Pods: &cnpv1beta1.NamespacedPod{NamespaceSelector: *c.ns(kv...), PodSelector: *sel("app", app)}}
}

func cidrPeer(cidrs ...string) cnpv1beta1.ClusterNetworkPolicyEgressPeer {
	p := cnpv1beta1.ClusterNetworkPolicyEgressPeer{}
	for _, s := range cidrs {
		p.Networks = append(p.Networks, cnpv1beta1.CIDR(s))
	}
	return p
}

func cnpIn(action cnpv1beta1.ClusterNetworkPolicyRuleAction, peer cnpv1beta1.ClusterNetworkPolicyEgressPeer, protos ...cnpv1beta1.ClusterNetworkPolicyProtocol) func(*cnpv1beta1.ClusterNetworkPolicy) {
	return func(p *cnpv1beta1.ClusterNetworkPolicy) {
		p.Spec.Ingress = append(p.Spec.Ingress, cnpv1beta1.ClusterNetworkPolicyIngressRule{Action: action, Protocols: protos,
			From: []cnpv1beta1.ClusterNetworkPolicyIngressPeer{{Namespaces: peer.Namespaces, Pods: peer.Pods}}})
	}
}

func cnpOut(action cnpv1beta1.ClusterNetworkPolicyRuleAction, peer cnpv1beta1.ClusterNetworkPolicyEgressPeer, protos ...cnpv1beta1.ClusterNetworkPolicyProtocol) func(*cnpv1beta1.ClusterNetworkPolicy) {
	return func(p *cnpv1beta1.ClusterNetworkPolicy) {
		p.Spec.Egress = append(p.Spec.Egress, cnpv1beta1.ClusterNetworkPolicyEgressRule{Action: action, Protocols: protos,
			To: []cnpv1beta1.ClusterNetworkPolicyEgressPeer{peer}})
	}
}

func onTCP(n int32) cnpv1beta1.ClusterNetworkPolicyProtocol {
	return cnpv1beta1.ClusterNetworkPolicyProtocol{TCP: &cnpv1beta1.ClusterNetworkPolicyProtocolTCP{DestinationPort: &cnpv1beta1.Port{Number: n}}}
}

func onTCPRange(from, to int32) cnpv1beta1.ClusterNetworkPolicyProtocol {
	return cnpv1beta1.ClusterNetworkPolicyProtocol{TCP: &cnpv1beta1.ClusterNetworkPolicyProtocolTCP{
		DestinationPort: &cnpv1beta1.Port{Range: &cnpv1beta1.PortRange{Start: from, End: to}}}}
}

// onUDP is every UDP port (the API wants a destinationPort).
func onUDP() cnpv1beta1.ClusterNetworkPolicyProtocol {
	return cnpv1beta1.ClusterNetworkPolicyProtocol{UDP: &cnpv1beta1.ClusterNetworkPolicyProtocolUDP{
		DestinationPort: &cnpv1beta1.Port{Range: &cnpv1beta1.PortRange{Start: 1, End: 65535}}}}
}

const (
	cnpAccept = cnpv1beta1.ClusterNetworkPolicyRuleActionAccept
	cnpDeny   = cnpv1beta1.ClusterNetworkPolicyRuleActionDeny
	cnpPass   = cnpv1beta1.ClusterNetworkPolicyRuleActionPass
)

func cnps(p ...*cnpv1beta1.ClusterNetworkPolicy) []*cnpv1beta1.ClusterNetworkPolicy { return p }

// scenarios are the table's rows, in order (a policy named in two
// consecutive rows is updated in place).
func (c *cnpBed) scenarios() []cnpScenario {
	admin, baseline := cnpv1beta1.AdminTier, cnpv1beta1.BaselineTier
	a := c.nsA
	allowAll := np(a, "allow-all", nil, ingressOnly, from(networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{}}))
	// clients of its namespace on TCP 80 only: what an Admin Pass hands to it
	// on other ports is denied (an Admin Accept would let it through)
	clientOnly := np(a, "client-only", map[string]string{"app": "web"}, ingressOnly,
		fromOn(peer(nil, sel("app", "client")), port(corev1.ProtocolTCP, intstr.FromInt32(80), nil)))
	everyone := c.nsPeer()
	webB := c.pods[3].eval.Addr.String()
	return []cnpScenario{
		{"no policy", nil, nil},
		{"baseline deny under no policy", cnps(c.cnp("base", baseline, 10, c.onNS("team", "a"), cnpIn(cnpDeny, everyone, onTCP(80), onUDP()))), nil},
		{"baseline not reached under a namespace policy", cnps(c.cnp("base", baseline, 10, c.onNS("team", "a"), cnpIn(cnpDeny, everyone))), pols(allowAll)},
		{"admin deny over a namespace allow", cnps(c.cnp("admin", admin, 10, c.onNS("team", "a"), cnpIn(cnpDeny, c.nsPeer("team", "b")))), pols(allowAll)},
		{"admin pass to a namespace policy", cnps(
			c.cnp("admin", admin, 10, c.onNS("team", "a"), cnpIn(cnpPass, c.nsPeer("team", "a"))),
			c.cnp("admin-deny", admin, 20, c.onNS("team", "a"), cnpIn(cnpDeny, everyone))), pols(clientOnly)},
		{"two admin policies: the lower priority first", cnps(
			c.cnp("admin", admin, 5, c.onNS("team", "a"), cnpIn(cnpAccept, c.podPeer("client", "team", "b"))),
			c.cnp("admin-deny", admin, 50, c.onNS("team", "a"), cnpIn(cnpDeny, c.nsPeer("team", "b")))), nil},
		{"two admin policies, priorities swapped", cnps(
			c.cnp("admin", admin, 50, c.onNS("team", "a"), cnpIn(cnpAccept, c.podPeer("client", "team", "b"))),
			c.cnp("admin-deny", admin, 5, c.onNS("team", "a"), cnpIn(cnpDeny, c.nsPeer("team", "b")))), nil},
		{"pods subject, pods peer, egress", cnps(c.cnp("clients-out", admin, 1, c.onPods("client"),
			cnpOut(cnpDeny, c.podPeer("web"), onUDP(), onTCP(8080)))), nil},
		{"networks (CIDR) peers", cnps(c.cnp("cidr", admin, 1, c.onNS("team", "a"),
			cnpOut(cnpAccept, cidrPeer(webB+"/32"), onTCP(80)), cnpOut(cnpDeny, cidrPeer(c.subnet)))), nil},
		{"rules in order, a port and a range", cnps(c.cnp("ports", admin, 1, c.onNS("team", "b"),
			cnpIn(cnpAccept, everyone, onTCP(8080)), cnpIn(cnpDeny, everyone, onTCPRange(70, 9000)))), nil},
		{"baseline pass ends the tier", cnps(
			c.cnp("base", baseline, 1, c.onNS(), cnpIn(cnpPass, c.nsPeer("team", "a"))),
			c.cnp("base-deny", baseline, 2, c.onNS(), cnpIn(cnpDeny, everyone))), nil},
		{"unlabelled: ignored", cnps(c.cnp("base", baseline, 1, c.onNS(), cnpIn(cnpDeny, everyone),
			func(p *cnpv1beta1.ClusterNetworkPolicy) { p.Labels = nil })), nil}, // as no policy
	}
}

// write makes the ClusterNetworkPolicies of the run the given ones
// (updating those of the same name in place).
func (c *cnpBed) write(t *testing.T, ps []*cnpv1beta1.ClusterNetworkPolicy) {
	t.Helper()
	ctx := testbed.Context(t, time.Minute)
	api := c.client.PolicyV1beta1().ClusterNetworkPolicies()
	want := map[string]bool{}
	for _, p := range ps {
		want[p.Name] = true
	}
	for name := range c.written {
		if !want[name] {
			if err := api.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Fatal(err)
			}
			delete(c.written, name)
		}
	}
	for _, p := range ps {
		cur, err := api.Get(ctx, p.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = api.Create(ctx, p.DeepCopy(), metav1.CreateOptions{})
		case err == nil:
			cur.Labels, cur.Spec = p.Labels, p.Spec
			_, err = api.Update(ctx, cur, metav1.UpdateOptions{})
		}
		if err != nil {
			t.Fatalf("write ClusterNetworkPolicy %s: %v", p.Name, err)
		}
		c.written[p.Name] = true
	}
}

// waitAgentsShowCluster waits until each node's agent lists, for each of
// the bed's pods there, the ClusterNetworkPolicies that select it in the
// bed's world.
func (b *polBed) waitAgentsShowCluster(t *testing.T, e *harness.Env, what string) {
	t.Helper()
	b.waitAgentsList(t, e, what+": the ClusterNetworkPolicies applied to each pod", b.world.SelectingCluster, harness.AgentHasCluster)
}

// notEnforced: a Deny over netclass's bounds (125 networks in one rule,
// more than the 100 peers it enforces) denies everything instead, and the
// ClusterNetworkPolicy gets a Warning Event naming a pod. (The standard
// channel's CRD, which netclass installs, has no nodes or domainNames
// peers nor named ports: shim/netpolicy's tests cover them.)
func (c *cnpBed) notEnforced(t *testing.T, e *harness.Env) {
	t.Helper()
	var opts []func(*cnpv1beta1.ClusterNetworkPolicy)
	rule := cnpv1beta1.ClusterNetworkPolicyEgressRule{Action: cnpDeny}
	for i := range 5 {
		var cidrs []string
		for j := range 25 {
			cidrs = append(cidrs, fmt.Sprintf("192.0.%d.0/24", i*25+j))
		}
		rule.To = append(rule.To, cidrPeer(cidrs...))
	}
	opts = append(opts, func(p *cnpv1beta1.ClusterNetworkPolicy) { p.Spec.Egress = append(p.Spec.Egress, rule) })
	p := c.cnp("over-bounds", cnpv1beta1.AdminTier, 1, c.onNS("team", "a"), opts...)
	c.write(t, cnps(p))
	web := c.pods[0]
	testbed.Poll(t, testbed.Context(t, liveTimeout), 250*time.Millisecond, "a NotEnforced Event on the ClusterNetworkPolicy",
		func(ctx context.Context) (bool, string, error) {
			evs, err := e.Kube.CoreV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + p.Name})
			if err != nil {
				return false, "", err
			}
			var seen []string
			for _, ev := range evs.Items {
				seen = append(seen, ev.InvolvedObject.Kind+" "+ev.Reason+": "+ev.Message)
				if ev.InvolvedObject.Kind == "ClusterNetworkPolicy" && ev.Type == corev1.EventTypeWarning &&
					ev.Reason == contract.ReasonPolicyNotEnforced && strings.Contains(ev.Message, web.String()) {
					return true, "", nil
				}
			}
			return false, strings.Join(seen, "; "), nil
		})
	if open, err := harness.Probe(web.netns, corev1.ProtocolTCP, c.pods[3].eval.Addr, 80, c.pods[3].l); err != nil || open {
		t.Errorf("a Deny netclass cannot enforce left %s's egress open (%v): it must deny everything", web, err)
	}
}
