package ruleagent

import (
	"context"
	"errors"
	"slices"
	"testing"

	mnpv1beta1 "github.com/k8snetworkplumbingwg/multi-networkpolicy/pkg/apis/k8s.cni.cncf.io/v1beta1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/netclass-dev/netclass/api/contract"
	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/conf/netpol"
)

// multusNet2 is pod's net2, which Multus made from the NAD t1/nad with a
// netclass plugin, in the same network namespace as the pod's claim
// attachment net1 (the fixture's).
func multusNet2(pod string) ForeignAttachment {
	return ForeignAttachment{Pod: types.NamespacedName{Namespace: "t1", Name: pod}, PodUID: types.UID(pod), SandboxID: "sb-" + pod,
		IfName: "net2", NetNS: "/ns/" + pod, NAD: types.NamespacedName{Namespace: "t1", Name: "nad"},
		HostIf: "nc-" + pod, MAC: "02:00:00:00:00:0" + pod[:1], CIDRs: []string{"10.9.0.2/24"}}
}

// A pod with a claim attachment (net1, PodNetwork blue) and a Multus one
// (net2, NAD t1/nad): a MultiNetworkPolicy whose policy-for names the NAD
// isolates net2 only; a labelled NetworkPolicy isolates both of the pods
// it selects; the outcomes name the NAD; an attachment whose record goes
// is forgotten; nothing here touches any QoS (no NetworkQoS selects the
// NAD's network: the plugin's own QoS stays as it is).
func TestForeignAttachmentsGetTheirNADsPolicies(t *testing.T) {
	f := newFixture()
	k := fakePolicyKernel{}
	foreign := []ForeignAttachment{multusNet2("a"), multusNet2("b")}
	var removed []string
	f.agent.Foreign = NewForeign(func() []ForeignAttachment { return foreign },
		func(h string) error { removed = append(removed, h); return nil })
	mnp := &mnpv1beta1.MultiNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "t1", Name: "web",
		Annotations: map[string]string{contract.AnnotationPolicyFor: "nad"}},
		Spec: mnpv1beta1.MultiNetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			PolicyTypes: []mnpv1beta1.MultiPolicyType{mnpv1beta1.PolicyTypeIngress}}}
	deny := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "t1", Name: "deny-db",
		Labels: map[string]string{contract.PolicyControllerLabel: contract.PolicyController}},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}}
	f.agent.NetPol = &NetPolicies{Kernel: k.sync, Peers: &netPeers{},
		List: func(string) ([]*networkingv1.NetworkPolicy, error) { return []*networkingv1.NetworkPolicy{deny}, nil },
		Multi: func(string) ([]*mnpv1beta1.MultiNetworkPolicy, error) {
			return []*mnpv1beta1.MultiNetworkPolicy{mnp}, nil
		}}
	f.policies["t1"] = []*ncv1.NetworkQoS{webQoS(18)} // selects PodNetworks and Networks: never a NAD's
	denied := &netpol.Plan{Ingress: netpol.Direction{Isolated: true}}
	outs := f.agent.Sync(context.Background())
	checkPlans(t, "policy-for nad", k, map[string]*netpol.Plan{"/ns/a/net1": {}, "/ns/a/net2": denied, "/ns/b/net1": denied, "/ns/b/net2": denied})
	if err := Errors(outs); err != nil {
		t.Fatal(err)
	}
	got := outcome(t, outs, "a", "net2")
	if got.NAD != (types.NamespacedName{Namespace: "t1", Name: "nad"}) || !slices.Equal(got.MultiPolicies, []string{"web"}) || got.Network.Kind != "NetworkAttachmentDefinition" {
		t.Errorf("a/net2's outcome: %+v", got)
	}
	if b := outcome(t, outs, "b", "net2"); !slices.Equal(b.Policies, []string{"deny-db"}) || len(b.MultiPolicies) != 0 {
		t.Errorf("b/net2's outcome: %+v", b)
	}
	if _, synced := f.kernel.plans["/ns/a/net2"]; synced {
		t.Errorf("a/net2's QoS was synced (%+v): no NetworkQoS selects its network", f.kernel.plans["/ns/a/net2"])
	}
	claimPlan := f.kernel.plans["/ns/a/net1"]
	foreign = foreign[1:] // a's net2 went (its record with its DEL)
	outs = f.agent.Sync(context.Background())
	for _, o := range outs {
		if o.Pod.Name == "a" && o.IfName == "net2" {
			t.Errorf("a's gone net2 still reported: %+v", o)
		}
	}
	if f.kernel.plans["/ns/a/net1"] != claimPlan {
		t.Errorf("a's claim attachment net1 was resynced when its Multus attachment went")
	}
	if len(removed) != 0 {
		t.Errorf("port rules removed for %v: the agent never changed their QoS", removed)
	}
}

// A foreign attachment whose pod is not known (yet) is left for a later
// sync; its policies are applied once it is.
func TestForeignAttachmentOfUnknownPodWaits(t *testing.T) {
	f := newFixture()
	k := fakePolicyKernel{}
	ghost := multusNet2("c")
	f.agent.Foreign = NewForeign(func() []ForeignAttachment { return []ForeignAttachment{ghost} }, func(string) error { return nil })
	deny := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "t1", Name: "deny-all",
		Labels: map[string]string{contract.PolicyControllerLabel: contract.PolicyController}}}
	f.agent.NetPol = &NetPolicies{Kernel: k.sync, Peers: &netPeers{},
		List: func(string) ([]*networkingv1.NetworkPolicy, error) { return []*networkingv1.NetworkPolicy{deny}, nil }}
	f.agent.Sync(context.Background())
	if _, ok := k["/ns/c/net2"]; ok {
		t.Fatalf("an attachment of an unknown pod got a plan")
	}
	f.pods["c"] = map[string]string{}
	f.agent.Sync(context.Background())
	checkPlans(t, "pod c known", k, map[string]*netpol.Plan{"/ns/c/net2": {Ingress: netpol.Direction{Isolated: true}, Egress: netpol.Direction{}}})
}

func outcome(t *testing.T, outs []Outcome, pod, ifname string) Outcome {
	t.Helper()
	for _, o := range outs {
		if o.Pod.Name == pod && o.IfName == ifname {
			return o
		}
	}
	t.Fatalf("no outcome for %s/%s in %+v", pod, ifname, outs)
	return Outcome{}
}

// The host end of a foreign attachment whose QoS the agent changed has its
// port rules removed once the attachment's record is gone (rules written
// after the plugin's DEL), retried while that fails, and never while the
// attachment is there.
func TestGoneForeignAttachmentsLoseTheirPortRules(t *testing.T) {
	f := newFixture()
	foreign := []ForeignAttachment{multusNet2("a")}
	var removed []string
	fail := errors.New("nft busy")
	f.agent.Foreign = NewForeign(func() []ForeignAttachment { return foreign }, func(h string) error {
		removed = append(removed, h)
		return fail
	})
	f.agent.Foreign.hosts[foreignKey(foreign[0])] = "nc-a" // as foreignQoS records it
	f.agent.Sync(context.Background())
	if len(removed) != 0 {
		t.Fatalf("port rules of a live attachment removed: %v", removed)
	}
	foreign = nil
	f.agent.Sync(context.Background())
	fail = nil
	f.agent.Sync(context.Background())
	f.agent.Sync(context.Background())
	if !slices.Equal(removed, []string{"nc-a", "nc-a"}) {
		t.Errorf("removals %v, want nc-a failed once, then done once", removed)
	}
}

// A foreign attachment whose pod's network-status stops naming its NAD
// (Unnamed) keeps what it holds: its policy is neither synced nor
// forgotten, its port rules stay; named again it holds its plan already;
// its port rules go only with its record.
func TestUnnamedForeignAttachmentKeepsItsRules(t *testing.T) {
	f := newFixture()
	k := fakePolicyKernel{}
	foreign := []ForeignAttachment{multusNet2("a")}
	var removed []string
	f.agent.Foreign = NewForeign(func() []ForeignAttachment { return foreign },
		func(h string) error { removed = append(removed, h); return nil })
	deny := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "t1", Name: "deny-all",
		Labels: map[string]string{contract.PolicyControllerLabel: contract.PolicyController}}}
	f.agent.NetPol = &NetPolicies{Kernel: k.sync, Peers: &netPeers{},
		List: func(string) ([]*networkingv1.NetworkPolicy, error) { return []*networkingv1.NetworkPolicy{deny}, nil }}
	f.agent.Sync(context.Background())
	checkPlans(t, "named", k, map[string]*netpol.Plan{"/ns/a/net2": {Ingress: netpol.Direction{Isolated: true}}})
	f.agent.Foreign.hosts[foreignKey(foreign[0])] = "nc-a" // as foreignQoS records it

	foreign0NAD := foreign[0].NAD
	unnamed := foreign[0]
	unnamed.NAD, unnamed.Unnamed = types.NamespacedName{}, true
	foreign = []ForeignAttachment{unnamed}
	delete(k, "/ns/a/net2")
	deny.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}
	outs := f.agent.Sync(context.Background())
	if plan, synced := k["/ns/a/net2"]; synced {
		t.Errorf("the unnamed attachment's policy was synced: %+v", plan)
	}
	if len(removed) != 0 {
		t.Errorf("the unnamed attachment's port rules were removed: %v", removed)
	}
	outs = unnamedOutcomes(outs)
	if len(outs) != 1 || outs[0].NAD != foreign0NAD || !slices.Equal(outs[0].Policies, []string{"deny-all"}) || outs[0].PolicyChanged {
		t.Errorf("outcomes %+v, want the unnamed attachment's last one (t1/nad, deny-all held), marked Unnamed", outs)
	}
	foreign = []ForeignAttachment{unnamed, {Pod: types.NamespacedName{Namespace: "t1", Name: "b"}, PodUID: "b", SandboxID: "sb-b", IfName: "net3", Unnamed: true, NotMultus: true}}
	outs = unnamedOutcomes(f.agent.Sync(context.Background()))
	if len(outs) != 2 || outs[0].NAD != foreign0NAD || outs[0].NotMultus || outs[1].Pod.Name != "b" || outs[1].NAD != (types.NamespacedName{}) || outs[1].Policies != nil || !outs[1].NotMultus {
		t.Errorf("outcomes %+v, want a's as before and b's net3 with nothing held (never named), not Multus's", outs)
	}
	deny.Spec.PolicyTypes = nil
	foreign = []ForeignAttachment{multusNet2("a")}
	f.agent.Sync(context.Background())
	if plan, synced := k["/ns/a/net2"]; synced {
		t.Errorf("named again, its policy was synced (%+v): the agent forgot the plan it holds", plan)
	}
	foreign = nil
	f.agent.Sync(context.Background())
	if !slices.Equal(removed, []string{"nc-a"}) {
		t.Errorf("removals %v, want nc-a once its record went", removed)
	}
}

func unnamedOutcomes(outs []Outcome) []Outcome {
	return slices.DeleteFunc(outs, func(o Outcome) bool { return !o.Unnamed })
}
