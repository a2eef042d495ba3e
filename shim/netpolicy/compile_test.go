package netpolicy

import (
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/netclass-dev/netclass/api/contract"
	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/conf/netpol"
	"github.com/netclass-dev/netclass/conf/qos"
	"github.com/netclass-dev/netclass/shim/attachment"
	"github.com/netclass-dev/netclass/shim/network"
	"github.com/netclass-dev/netclass/shim/peers"
)

var blue = network.Network{Ref: attachment.NetworkRef{Kind: "PodNetwork", Name: "blue"}}

// peersByLabel resolves a pod selector app=X to the address listed for X;
// each pod names its TCP port 8000+<last byte of its address> "http".
type peersByLabel map[string]string

func (p peersByLabel) Endpoints(_ string, to ncv1.Destination, _ network.Network) ([]peers.Endpoint, error) {
	var out []peers.Endpoint
	for app, a := range p {
		if to.PodSelector == nil || to.PodSelector.MatchLabels["app"] == app {
			addr := netip.MustParseAddr(a)
			out = append(out, peers.Endpoint{Addrs: []netip.Addr{addr},
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8000 + int32(addr.As4()[3])}}})
		}
	}
	slices.SortFunc(out, func(a, b peers.Endpoint) int { return a.Addrs[0].Compare(b.Addrs[0]) })
	return out, nil
}

func policy(name string, mutate func(*networkingv1.NetworkPolicy)) *networkingv1.NetworkPolicy {
	p := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "t1", Name: name,
		Labels: map[string]string{contract.PolicyControllerLabel: contract.PolicyController}},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "server"}}}}
	if mutate != nil {
		mutate(p)
	}
	return p
}

func from(app string) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}
}

func tcp(port intstr.IntOrString, end *int32) networkingv1.NetworkPolicyPort {
	return networkingv1.NetworkPolicyPort{Protocol: ptr.To(corev1.ProtocolTCP), Port: &port, EndPort: end}
}

func host(a string) []qos.Range {
	ad := netip.MustParseAddr(a)
	return []qos.Range{{From: ad, To: ad}}
}

func TestCompile(t *testing.T) {
	target := Target{Namespace: "t1", Labels: map[string]string{"app": "server"}, Network: blue,
		Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}, {Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP}}}
	res := peersByLabel{"client": "10.0.0.2", "other": "10.0.0.3"}
	none := []qos.Range{}
	tests := []struct {
		name     string
		pols     []*networkingv1.NetworkPolicy
		want     netpol.Plan
		selected []string
		err      string
	}{
		{name: "no policy"},
		{
			name: "default-deny ingress", pols: []*networkingv1.NetworkPolicy{policy("deny", nil)},
			want: netpol.Plan{Ingress: netpol.Direction{Isolated: true}}, selected: []string{"deny"},
		},
		{
			name: "default-deny egress",
			pols: []*networkingv1.NetworkPolicy{policy("deny", func(p *networkingv1.NetworkPolicy) {
				p.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
			})},
			want: netpol.Plan{Egress: netpol.Direction{Isolated: true}}, selected: []string{"deny"},
		},
		{
			name: "egress rules imply the egress type",
			pols: []*networkingv1.NetworkPolicy{policy("out", func(p *networkingv1.NetworkPolicy) {
				p.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{}}
			})},
			want:     netpol.Plan{Ingress: netpol.Direction{Isolated: true}, Egress: netpol.Direction{Isolated: true, Allow: []netpol.Allow{{}}}},
			selected: []string{"out"},
		},
		{
			name: "from a pod selector, on a numbered port and a range",
			pols: []*networkingv1.NetworkPolicy{policy("web", func(p *networkingv1.NetworkPolicy) {
				p.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{from("client")},
					Ports: []networkingv1.NetworkPolicyPort{tcp(intstr.FromInt32(80), nil), tcp(intstr.FromInt32(9000), ptr.To(int32(9010)))}}}
			})},
			want: netpol.Plan{Ingress: netpol.Direction{Isolated: true, Allow: []netpol.Allow{{V4: host("10.0.0.2"), V6: none,
				Ports: []netpol.PortRange{{Proto: 6, From: 80, To: 80}, {Proto: 6, From: 9000, To: 9010}}}}}},
			selected: []string{"web"},
		},
		{
			name: "named ports resolve against the pod's own",
			pols: []*networkingv1.NetworkPolicy{policy("named", func(p *networkingv1.NetworkPolicy) {
				p.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{
					{Ports: []networkingv1.NetworkPolicyPort{tcp(intstr.FromString("http"), nil),
						{Protocol: ptr.To(corev1.ProtocolUDP), Port: ptr.To(intstr.FromString("dns"))}}},
					{Ports: []networkingv1.NetworkPolicyPort{tcp(intstr.FromString("nope"), nil)}}, // allows nothing
				}
			})},
			want: netpol.Plan{Ingress: netpol.Direction{Isolated: true, Allow: []netpol.Allow{{
				Ports: []netpol.PortRange{{Proto: 6, From: 8080, To: 8080}, {Proto: 17, From: 53, To: 53}}}}}},
			selected: []string{"named"},
		},
		{
			name: "ipBlock with except",
			pols: []*networkingv1.NetworkPolicy{policy("block", func(p *networkingv1.NetworkPolicy) {
				p.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{
					{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/30", Except: []string{"10.0.0.2/32"}}}}}}
			})},
			want: netpol.Plan{Ingress: netpol.Direction{Isolated: true, Allow: []netpol.Allow{{V4: []qos.Range{
				{From: netip.MustParseAddr("10.0.0.0"), To: netip.MustParseAddr("10.0.0.1")}, {From: netip.MustParseAddr("10.0.0.3"), To: netip.MustParseAddr("10.0.0.3")}}, V6: none}}}},
			selected: []string{"block"},
		},
		{
			name: "peers without an address on the network allow nothing",
			pols: []*networkingv1.NetworkPolicy{policy("ghost", func(p *networkingv1.NetworkPolicy) {
				p.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{from("ghost")}}}
			})},
			want: netpol.Plan{Ingress: netpol.Direction{Isolated: true}}, selected: []string{"ghost"},
		},
		{
			name: "two policies: the union",
			pols: []*networkingv1.NetworkPolicy{
				policy("a", func(p *networkingv1.NetworkPolicy) {
					p.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{from("client")}}}
				}),
				policy("b", func(p *networkingv1.NetworkPolicy) {
					p.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{from("other")}}}
				}),
			},
			want: netpol.Plan{Ingress: netpol.Direction{Isolated: true, Allow: []netpol.Allow{
				{V4: host("10.0.0.2"), V6: none}, {V4: host("10.0.0.3"), V6: none}}}},
			selected: []string{"a", "b"},
		},
		{
			name: "unlabelled, another controller's, none, another namespace, another pod: ignored",
			pols: []*networkingv1.NetworkPolicy{
				policy("unlabelled", func(p *networkingv1.NetworkPolicy) { p.Labels = nil }),
				policy("theirs", func(p *networkingv1.NetworkPolicy) { p.Labels[contract.PolicyControllerLabel] = "other.example.com" }),
				policy("none", func(p *networkingv1.NetworkPolicy) { p.Labels[contract.PolicyControllerLabel] = "none" }),
				policy("elsewhere", func(p *networkingv1.NetworkPolicy) { p.Namespace = "t2" }),
				policy("db", func(p *networkingv1.NetworkPolicy) { p.Spec.PodSelector.MatchLabels["app"] = "db" }),
			},
		},
		{
			name: "scoped to another network: ignored; to this one: applied",
			pols: []*networkingv1.NetworkPolicy{
				policy("red", func(p *networkingv1.NetworkPolicy) {
					p.Annotations = map[string]string{contract.AnnotationPolicyNetworks: "red, t1/blue"}
				}),
				policy("blue", func(p *networkingv1.NetworkPolicy) {
					p.Annotations = map[string]string{contract.AnnotationPolicyNetworks: "t1/red,blue"}
				}),
			},
			want: netpol.Plan{Ingress: netpol.Direction{Isolated: true}}, selected: []string{"blue"},
		},
		{
			name: "an egress named port is each destination pod's own",
			pols: []*networkingv1.NetworkPolicy{policy("out", func(p *networkingv1.NetworkPolicy) {
				p.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
				p.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{Ports: []networkingv1.NetworkPolicyPort{
					tcp(intstr.FromString("http"), nil), tcp(intstr.FromInt32(22), nil)}}}
			})},
			want: netpol.Plan{Egress: netpol.Direction{Isolated: true, Allow: []netpol.Allow{
				{Ports: []netpol.PortRange{{Proto: 6, From: 22, To: 22}}},
				{V4: host("10.0.0.2"), V6: none, Ports: []netpol.PortRange{{Proto: 6, From: 8002, To: 8002}}},
				{V4: host("10.0.0.3"), V6: none, Ports: []netpol.PortRange{{Proto: 6, From: 8003, To: 8003}}},
			}}}, selected: []string{"out"},
		},
		{
			name: "an egress named port to an ipBlock is reported and left out",
			pols: []*networkingv1.NetworkPolicy{policy("out", func(p *networkingv1.NetworkPolicy) {
				p.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
				p.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{
					To:    []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/24"}}, {PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}}}},
					Ports: []networkingv1.NetworkPolicyPort{tcp(intstr.FromString("http"), nil)}}}
			})},
			want: netpol.Plan{Egress: netpol.Direction{Isolated: true, Allow: []netpol.Allow{
				{V4: host("10.0.0.3"), V6: none, Ports: []netpol.PortRange{{Proto: 6, From: 8003, To: 8003}}},
			}}}, selected: []string{"out"},
			err: "NetworkPolicy t1/out egress[0]: peer 0: a named port to an ipBlock",
		},
		{
			name: "a bad ipBlock is reported, never a panic",
			pols: []*networkingv1.NetworkPolicy{policy("bad", func(p *networkingv1.NetworkPolicy) {
				p.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/33"}}}}}
			})},
			want: netpol.Plan{Ingress: netpol.Direction{Isolated: true}}, selected: []string{"bad"},
			err: "NetworkPolicy t1/bad ingress[0]: peer 0: ipBlock",
		},
	}
	memo := Memo(res) // shared by the cases, as by the attachments of one sync
	for _, tc := range tests {
		// Directly, then through the memo (resolving), then from it.
		for i, via := range []Peers{res, memo, memo} {
			t.Run(fmt.Sprintf("%s/%d", tc.name, i), func(t *testing.T) {
				plan, selected, err := Compile(tc.pols, target, via)
				if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				if !reflect.DeepEqual(plan, tc.want) {
					t.Errorf("plan\n%+v\nwant\n%+v", plan, tc.want)
				}
				if !reflect.DeepEqual(selected, tc.selected) {
					t.Errorf("selected %v, want %v", selected, tc.selected)
				}
				scribble(plan) // a plan is its holder's: the memo must not share its ranges
			})
		}
	}
}

// scribble overwrites every range of the plan.
func scribble(plan netpol.Plan) {
	for _, d := range []netpol.Direction{plan.Ingress, plan.Egress} {
		for _, a := range d.Allow {
			for i := range a.V4 {
				a.V4[i] = qos.Range{}
			}
			for i := range a.V6 {
				a.V6[i] = qos.Range{}
			}
		}
	}
}

// Each part left out is a RuleError naming its policy and path.
func TestRuleErrors(t *testing.T) {
	bad := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "t1", Name: "bad",
		Labels: map[string]string{contract.PolicyControllerLabel: contract.PolicyController}},
		Spec: networkingv1.NetworkPolicySpec{
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{{}, {From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "nonsense"}}}}},
			Egress: []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/24"}}},
				Ports: []networkingv1.NetworkPolicyPort{{Port: ptr.To(intstr.FromString("http"))}}}},
		}}
	_, _, err := Compile([]*networkingv1.NetworkPolicy{bad}, Target{Namespace: "t1"}, nil)
	var got []string
	for _, re := range RuleErrors(err) {
		got = append(got, re.Namespace+"/"+re.Name+" "+re.Path)
	}
	if want := []string{"t1/bad ingress[1]", "t1/bad egress[0]"}; !slices.Equal(got, want) {
		t.Errorf("rule errors %v, want %v (from %v)", got, want, err)
	}
	if RuleErrors(nil) != nil {
		t.Error("RuleErrors(nil) is not empty")
	}
}

// endpoints is a fixed answer of Peers.
type endpoints []peers.Endpoint

func (e endpoints) Endpoints(string, ncv1.Destination, network.Network) ([]peers.Endpoint, error) {
	return e, nil
}

// Destinations whose named port resolves alike share one allow: a
// workload of many pods costs one rule, not one per pod.
func TestNamedEgressGroupsDestinations(t *testing.T) {
	http := func(port int32) []corev1.ContainerPort {
		return []corev1.ContainerPort{{Name: "http", ContainerPort: port}}
	}
	res := endpoints{
		{Addrs: []netip.Addr{netip.MustParseAddr("10.0.0.2")}, Ports: http(8080)},
		{Addrs: []netip.Addr{netip.MustParseAddr("10.0.0.4")}, Ports: http(9090)},
		{Addrs: []netip.Addr{netip.MustParseAddr("10.0.0.3")}, Ports: http(8080)},
		{Addrs: []netip.Addr{netip.MustParseAddr("10.0.0.5")}}, // names no port: no allow
	}
	out := policy("out", func(p *networkingv1.NetworkPolicy) {
		p.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
		p.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{Ports: []networkingv1.NetworkPolicyPort{tcp(intstr.FromString("http"), nil)}}}
	})
	plan, _, err := Compile([]*networkingv1.NetworkPolicy{out}, Target{Namespace: "t1", Labels: map[string]string{"app": "server"}, Network: blue}, res)
	if err != nil {
		t.Fatal(err)
	}
	none := []qos.Range{}
	want := []netpol.Allow{
		{V4: []qos.Range{{From: netip.MustParseAddr("10.0.0.2"), To: netip.MustParseAddr("10.0.0.3")}}, V6: none, Ports: []netpol.PortRange{{Proto: 6, From: 8080, To: 8080}}},
		{V4: host("10.0.0.4"), V6: none, Ports: []netpol.PortRange{{Proto: 6, From: 9090, To: 9090}}},
	}
	if !reflect.DeepEqual(plan.Egress.Allow, want) {
		t.Errorf("allows\n%+v\nwant\n%+v", plan.Egress.Allow, want)
	}
}

// A scoping annotation that is empty, malformed or names no network makes
// the policy apply nowhere: the error names the annotation and the bad
// entries, once per attachment it did not select.
func TestScopeErrors(t *testing.T) {
	known := func(entry string) bool { return entry == "blue" || entry == "t1/red" }
	for _, tc := range []struct {
		annotation string
		want       string // "" : no error
	}{
		{"blue", ""},
		{"green, t1/red", `"green" names no PodNetwork or Network`},
		{"", `"" is neither`},
		{"a/b/c", `"a/b/c" is neither`},
		{"/x", `"/x" is neither`},
		{"t1/red", ""},
	} {
		p := policy("scoped", func(p *networkingv1.NetworkPolicy) {
			p.Annotations = map[string]string{contract.AnnotationPolicyNetworks: tc.annotation}
		})
		other := network.Network{Ref: attachment.NetworkRef{Kind: "PodNetwork", Name: "other"}}
		_, _, err := Compile([]*networkingv1.NetworkPolicy{p}, Target{Namespace: "t1", Labels: map[string]string{"app": "server"}, Network: other, Known: known}, peersByLabel{})
		res := RuleErrors(err)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q: %v, want no error", tc.annotation, err)
		case tc.want != "" && (len(res) != 1 || res[0].Path != ScopePath || !strings.Contains(res[0].Error(), tc.want)):
			t.Errorf("%q: %v, want a RuleError at %s saying %s", tc.annotation, err, ScopePath, tc.want)
		}
	}
}
