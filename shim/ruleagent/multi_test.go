package ruleagent

import (
	"context"
	"net/netip"
	"slices"
	"testing"

	mnpv1beta1 "github.com/k8snetworkplumbingwg/multi-networkpolicy/pkg/apis/k8s.cni.cncf.io/v1beta1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/netclass-dev/netclass/api/contract"
	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/conf/netpol"
	"github.com/netclass-dev/netclass/conf/qos"
	"github.com/netclass-dev/netclass/shim/attachment"
	"github.com/netclass-dev/netclass/shim/checkpoint"
	"github.com/netclass-dev/netclass/shim/network"
	"github.com/netclass-dev/netclass/shim/peers"
)

var red = attachment.NetworkRef{Class: "c", Group: "netclass.dev", Version: "v1alpha1", Kind: "Network", Namespace: "t1", Name: "red"}

// netPeers resolves every selector to one address per network (10.0.1.2
// on blue, 10.0.2.2 on red) and records the networks it was asked about.
type netPeers struct{ asked []string }

func (p *netPeers) Endpoints(_ string, _ ncv1.Destination, n network.Network) ([]peers.Endpoint, error) {
	p.asked = append(p.asked, n.Ref.Name)
	addr := map[string]string{"blue": "10.0.1.2", "red": "10.0.2.2"}[n.Ref.Name]
	return []peers.Endpoint{{Addrs: []netip.Addr{netip.MustParseAddr(addr)}}}, nil
}

// withRed attaches pods a and b of the fixture to the Network t1/red too,
// as net2.
func withRed(f *fixture) {
	c := f.claims.claims[0]
	var ats []checkpoint.Attachment
	for _, pod := range []string{"a", "b"} {
		ats = append(ats, checkpoint.Attachment{PodUID: types.UID(pod), SandboxID: "sb-" + pod, NetNS: "/ns/" + pod, IfName: "net2",
			State: checkpoint.Attached, Result: &checkpoint.Result{InterfaceName: "net2"}})
	}
	c.Devices = append(c.Devices, checkpoint.Device{Device: "red", Pool: "n1", Network: red, Attachments: ats})
	f.networks["red"] = network.Network{Ref: red}
}

// A MultiNetworkPolicy isolates the attachments of the pods it selects on
// the networks its policy-for names, and only those, its peers resolved on
// that network; a labelled NetworkPolicy keeps isolating every netclass
// attachment of the pods it selects; the outcomes name each kind apart.
func TestMultiNetworkPoliciesApplyOnTheirNetworksOnly(t *testing.T) {
	f := newFixture()
	withRed(f)
	k, res := fakePolicyKernel{}, &netPeers{}
	mnp := &mnpv1beta1.MultiNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "t1", Name: "web",
		Annotations: map[string]string{contract.AnnotationPolicyFor: "blue"}},
		Spec: mnpv1beta1.MultiNetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Ingress: []mnpv1beta1.MultiNetworkPolicyIngressRule{{From: []mnpv1beta1.MultiNetworkPolicyPeer{
				{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}}}}}}
	elsewhere := mnp.DeepCopy()
	elsewhere.Name, elsewhere.Annotations = "elsewhere", map[string]string{contract.AnnotationPolicyFor: "t2/red, green"}
	deny := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "t1", Name: "deny-db",
		Labels: map[string]string{contract.PolicyControllerLabel: contract.PolicyController}},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}}
	f.agent.NetPol = &NetPolicies{Kernel: k.sync, Peers: res,
		List: func(string) ([]*networkingv1.NetworkPolicy, error) { return []*networkingv1.NetworkPolicy{deny}, nil },
		Multi: func(string) ([]*mnpv1beta1.MultiNetworkPolicy, error) {
			return []*mnpv1beta1.MultiNetworkPolicy{mnp, elsewhere}, nil
		}}
	isolatedFrom := func(addr string) *netpol.Plan {
		a := netip.MustParseAddr(addr)
		return &netpol.Plan{Ingress: netpol.Direction{Isolated: true, Allow: []netpol.Allow{{V4: []qos.Range{{From: a, To: a}}, V6: []qos.Range{}}}}}
	}
	denied := &netpol.Plan{Ingress: netpol.Direction{Isolated: true}}
	ctx := context.Background()
	outs := f.agent.Sync(ctx)
	want := map[string]*netpol.Plan{"/ns/a/net1": isolatedFrom("10.0.1.2"), "/ns/a/net2": {}, "/ns/b/net1": denied, "/ns/b/net2": denied}
	checkPlans(t, "policy-for blue", k, want)
	if slices.Contains(res.asked, "red") {
		t.Errorf("peers resolved on %v: the policy on blue asked about red", res.asked)
	}
	named := map[string][2][]string{}
	for _, o := range outs {
		named[o.Pod.Name+"/"+o.IfName] = [2][]string{o.Policies, o.MultiPolicies}
	}
	if got := named["a/net1"]; len(got[0]) != 0 || !slices.Equal(got[1], []string{"web"}) {
		t.Errorf("a/net1 names NetworkPolicies %v, MultiNetworkPolicies %v; want none and [web]", got[0], got[1])
	}
	if got := named["b/net2"]; !slices.Equal(got[0], []string{"deny-db"}) || len(got[1]) != 0 {
		t.Errorf("b/net2 names NetworkPolicies %v, MultiNetworkPolicies %v; want [deny-db] and none", got[0], got[1])
	}
	mnp.Annotations[contract.AnnotationPolicyFor] = "red" // a bare name: the Network red of the policy's namespace
	f.agent.Sync(ctx)
	want["/ns/a/net1"], want["/ns/a/net2"] = &netpol.Plan{}, isolatedFrom("10.0.2.2")
	checkPlans(t, "policy-for red", k, want)
	delete(mnp.Annotations, contract.AnnotationPolicyFor)
	f.agent.Sync(ctx)
	want["/ns/a/net2"] = &netpol.Plan{}
	checkPlans(t, "no policy-for", k, want)
}

func checkPlans(t *testing.T, what string, k fakePolicyKernel, want map[string]*netpol.Plan) {
	t.Helper()
	for key, w := range want {
		got := k[key]
		switch {
		case got == nil:
			t.Errorf("%s: %s has no plan", what, key)
		case w.IsZero() && !got.IsZero():
			t.Errorf("%s: %s: %+v, want open", what, key, got)
		case !w.IsZero() && !equalPlans(got, w):
			t.Errorf("%s: %s: %+v, want %+v", what, key, got, w)
		}
	}
}

func equalPlans(a, b *netpol.Plan) bool {
	return a.Ingress.Isolated == b.Ingress.Isolated && a.Egress.Isolated == b.Egress.Isolated &&
		slices.EqualFunc(a.Ingress.Allow, b.Ingress.Allow, equalAllow) && slices.EqualFunc(a.Egress.Allow, b.Egress.Allow, equalAllow)
}

func equalAllow(a, b netpol.Allow) bool {
	return slices.Equal(a.V4, b.V4) && slices.Equal(a.V6, b.V6) && slices.Equal(a.Ports, b.Ports)
}
