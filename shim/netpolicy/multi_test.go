package netpolicy

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	mnpv1beta1 "github.com/k8snetworkplumbingwg/multi-networkpolicy/pkg/apis/k8s.cni.cncf.io/v1beta1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/randfill"

	"github.com/netclass-dev/netclass/api/contract"
	"github.com/netclass-dev/netclass/conf/netpol"
	"github.com/netclass-dev/netclass/shim/attachment"
	"github.com/netclass-dev/netclass/shim/network"
)

func TestParsePolicyFor(t *testing.T) {
	tests := []struct {
		in   string
		want []NetworkName
		err  []string // substrings of the error, in order; none: no error
	}{
		{in: ""},
		{in: " , ,"},
		{in: "blue", want: []NetworkName{{Name: "blue"}}},
		{in: " blue ,t1/red,  t2/green.v2 ", want: []NetworkName{{Name: "blue"}, {Namespace: "t1", Name: "red"}, {Namespace: "t2", Name: "green.v2"}}},
		{in: "blue,,red", want: []NetworkName{{Name: "blue"}, {Name: "red"}}},
		{in: "t1/", err: []string{`[0]: "t1/": name`}},
		{in: "/red", err: []string{`[0]: "/red": namespace`}},
		{in: "a/b/c", err: []string{`"a/b/c": name`}},
		{in: "Blue, red, t_1/x", want: []NetworkName{{Name: "red"}}, err: []string{`[0]: "Blue"`, `[2]: "t_1/x": namespace`}},
		{in: "t1 / red", err: []string{`"t1 / red"`}},
		{in: strings.Repeat("x", 254), err: []string{"name must be no more than 253"}},
	}
	for _, tc := range tests {
		got, err := ParsePolicyFor(tc.in)
		if !slices.Equal(got, tc.want) {
			t.Errorf("ParsePolicyFor(%q) = %v, want %v", tc.in, got, tc.want)
		}
		switch {
		case len(tc.err) == 0 && err != nil:
			t.Errorf("ParsePolicyFor(%q): %v", tc.in, err)
		case len(tc.err) > 0 && err == nil:
			t.Errorf("ParsePolicyFor(%q): no error, want %q", tc.in, tc.err)
		case err != nil:
			rest := err.Error()
			for _, s := range tc.err {
				i := strings.Index(rest, s)
				if i < 0 {
					t.Errorf("ParsePolicyFor(%q): error %q lacks %q (in order)", tc.in, err, s)
					break
				}
				rest = rest[i+len(s):]
			}
			if !strings.Contains(err.Error(), "metadata.annotations["+contract.AnnotationPolicyFor+"]") {
				t.Errorf("ParsePolicyFor(%q): error %q names no field path", tc.in, err)
			}
		}
	}
}

func TestForNetwork(t *testing.T) {
	podNet := func(name string) network.Network {
		return network.Network{Ref: attachment.NetworkRef{Kind: network.PodNetworkGVK.Kind, Name: name}}
	}
	net := func(ns, name string) network.Network {
		return network.Network{Ref: attachment.NetworkRef{Kind: network.NetworkGVK.Kind, Namespace: ns, Name: name}}
	}
	nad := func(ns, name string) network.Network {
		return network.FromNAD(types.NamespacedName{Namespace: ns, Name: name})
	}
	generated := func(n network.Network, backingNS, backing string) network.Network {
		ref := network.BackingRef(backingNS, backing)
		n.Backing = &ref
		return n
	}
	tests := []struct {
		policyFor string
		net       network.Network
		want      bool
	}{
		{"blue", podNet("blue"), true},
		{"red, blue", podNet("blue"), true},
		{"blue", podNet("red"), false},
		{"t1/blue", podNet("blue"), false}, // a PodNetwork has no namespace
		{"t1/red", net("t1", "red"), true},
		{"t2/red", net("t1", "red"), false},
		{"red", net("t1", "red"), true},  // a bare name: a Network of the policy's namespace (t1)
		{"red", net("t2", "red"), false}, // but not of another
		{"", podNet("blue"), false},
		{"Blue", podNet("Blue"), false}, // not a valid name: names nothing
		// a NetworkAttachmentDefinition's (an attachment Multus made)
		{"t2/nad", nad("t2", "nad"), true},
		{"nad", nad("t1", "nad"), true},  // a bare name: of the policy's namespace, as Multus reads it
		{"nad", nad("t2", "nad"), false}, // not of another
		{"t1/nad", nad("t2", "nad"), false},
		{"t1/nad", net("t1", "nad"), true}, // a Network of that name is still the Network
		{"t1/red", nad("t1", "blue"), false},
		// netclass-controller's NAD (of any namespace) is on the network behind it
		{"storage", generated(nad("t2", "storage"), "", "storage"), true},
		{"t1/vx", generated(nad("t1", "vx"), "t1", "vx"), true},
		{"vx", generated(nad("t2", "vx"), "t2", "vx"), false}, // a bare name: of the policy's namespace
		{"other", generated(nad("t2", "storage"), "", "storage"), false},
	}
	for _, tc := range tests {
		names, _ := ParsePolicyFor(tc.policyFor)
		if got := ForNetwork(names, "t1", tc.net); got != tc.want {
			t.Errorf("policy-for %q of a policy in t1 on %s: %v, want %v", tc.policyFor, tc.net.Ref, got, tc.want)
		}
	}
}

// fullMulti is a MultiNetworkPolicy with every field set.
func fullMulti() *mnpv1beta1.MultiNetworkPolicy {
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "client"},
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}}}}
	return &mnpv1beta1.MultiNetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "t1", Name: "web", Labels: map[string]string{"x": "y"},
			Annotations: map[string]string{contract.AnnotationPolicyFor: "blue"}},
		Spec: mnpv1beta1.MultiNetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "server"}},
			Ingress: []mnpv1beta1.MultiNetworkPolicyIngressRule{{
				Ports: []mnpv1beta1.MultiNetworkPolicyPort{{Protocol: ptr.To(corev1.ProtocolUDP), Port: ptr.To(intstr.FromInt32(53)), EndPort: ptr.To(int32(60))},
					{Port: ptr.To(intstr.FromString("http"))}, {Protocol: ptr.To(corev1.ProtocolSCTP)}},
				From: []mnpv1beta1.MultiNetworkPolicyPeer{{PodSelector: sel, NamespaceSelector: &metav1.LabelSelector{}},
					{IPBlock: &mnpv1beta1.IPBlock{CIDR: "10.0.0.0/8", Except: []string{"10.1.0.0/16"}}}},
			}, {}},
			Egress:      []mnpv1beta1.MultiNetworkPolicyEgressRule{{To: []mnpv1beta1.MultiNetworkPolicyPeer{{NamespaceSelector: sel}}}},
			PolicyTypes: []mnpv1beta1.MultiPolicyType{mnpv1beta1.PolicyTypeIngress, mnpv1beta1.PolicyTypeEgress},
		},
	}
}

func TestFromMulti(t *testing.T) {
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "client"},
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}}}}
	meta := metav1.TypeMeta{Kind: KindMultiNetworkPolicy, APIVersion: "k8s.cni.cncf.io/v1beta1"}
	tests := []struct {
		name string
		in   *mnpv1beta1.MultiNetworkPolicy
		want *networkingv1.NetworkPolicy
	}{
		{"empty", &mnpv1beta1.MultiNetworkPolicy{}, &networkingv1.NetworkPolicy{TypeMeta: meta}},
		{"empty lists stay empty", &mnpv1beta1.MultiNetworkPolicy{Spec: mnpv1beta1.MultiNetworkPolicySpec{
			Ingress: []mnpv1beta1.MultiNetworkPolicyIngressRule{{Ports: []mnpv1beta1.MultiNetworkPolicyPort{}, From: []mnpv1beta1.MultiNetworkPolicyPeer{}}},
			Egress:  []mnpv1beta1.MultiNetworkPolicyEgressRule{}, PolicyTypes: []mnpv1beta1.MultiPolicyType{}}},
			&networkingv1.NetworkPolicy{TypeMeta: meta, Spec: networkingv1.NetworkPolicySpec{
				Ingress: []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{}, From: []networkingv1.NetworkPolicyPeer{}}},
				Egress:  []networkingv1.NetworkPolicyEgressRule{}, PolicyTypes: []networkingv1.PolicyType{}}}},
		{"every field", fullMulti(), &networkingv1.NetworkPolicy{TypeMeta: meta,
			ObjectMeta: metav1.ObjectMeta{Namespace: "t1", Name: "web", Labels: map[string]string{"x": "y"},
				Annotations: map[string]string{contract.AnnotationPolicyFor: "blue"}},
			Spec: networkingv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "server"}},
				Ingress: []networkingv1.NetworkPolicyIngressRule{{
					Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.ProtocolUDP), Port: ptr.To(intstr.FromInt32(53)), EndPort: ptr.To(int32(60))},
						{Port: ptr.To(intstr.FromString("http"))}, {Protocol: ptr.To(corev1.ProtocolSCTP)}},
					From: []networkingv1.NetworkPolicyPeer{{PodSelector: sel, NamespaceSelector: &metav1.LabelSelector{}},
						{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8", Except: []string{"10.1.0.0/16"}}}},
				}, {}},
				Egress:      []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: sel}}}},
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := FromMulti(tc.in); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("FromMulti:\n got %#v\nwant %#v", got, tc.want)
			}
		})
	}
}

// FuzzFromMulti: for any MultiNetworkPolicy (filled at random from the
// input), FromMulti's spec encodes to the same JSON as the
// MultiNetworkPolicy's (the two APIs name their fields alike: this checks
// the copy against the wire form, with no code of the conversion), and
// shares nothing with it (changing the source afterwards changes nothing).
func FuzzFromMulti(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("netclass multi-networkpolicy seed"))
	f.Add([]byte{0xff, 0, 0x7f, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20})
	f.Add([]byte(strings.Repeat("\x01\x02\x03\x05\x08\x0d", 40)))
	f.Fuzz(func(t *testing.T, data []byte) {
		var src mnpv1beta1.MultiNetworkPolicy
		randfill.NewFromGoFuzz(data).NilChance(0.3).NumElements(0, 3).Fill(&src.Spec)
		got := FromMulti(&src)
		want := mustJSON(t, src.Spec)
		if g := mustJSON(t, got.Spec); string(g) != want {
			t.Fatalf("FromMulti spec\n%s\nthe MultiNetworkPolicy's\n%s", g, want)
		}
		randfill.NewWithSeed(int64(len(data))+1).NilChance(0).NumElements(1, 2).Fill(&src.Spec)
		if g := mustJSON(t, got.Spec); string(g) != want {
			t.Fatalf("changing the source changed the conversion:\n%s\nwas\n%s", g, want)
		}
	})
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// FuzzParsePolicyFor: ParsePolicyFor never panics, returns only valid
// names, and the names it returns, written back, parse to themselves.
func FuzzParsePolicyFor(f *testing.F) {
	for _, s := range []string{"", "blue", " blue , t1/red ", "a/b/c", ",,,", "Blue,t_1/x", "t1/", "/x", "é/ü"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		names, _ := ParsePolicyFor(s)
		var parts []string
		for _, n := range names {
			if n.Name == "" || strings.ContainsAny(n.Name+n.Namespace, "/, \t") {
				t.Fatalf("%q: entry %+v", s, n)
			}
			if n.Namespace == "" {
				parts = append(parts, n.Name)
			} else {
				parts = append(parts, n.Namespace+"/"+n.Name)
			}
		}
		again, err := ParsePolicyFor(strings.Join(parts, ","))
		if err != nil || !slices.Equal(again, names) {
			t.Fatalf("%q: %v written back parses to %v, %v", s, names, again, err)
		}
	})
}

// multi is a MultiNetworkPolicy with the spec of a labelled NetworkPolicy
// and the policy-for given.
func multi(p *networkingv1.NetworkPolicy, policyFor *string) *mnpv1beta1.MultiNetworkPolicy {
	var m mnpv1beta1.MultiNetworkPolicy
	b, _ := json.Marshal(p.Spec)
	if err := json.Unmarshal(b, &m.Spec); err != nil {
		panic(err)
	}
	m.Namespace, m.Name = p.Namespace, p.Name
	if policyFor != nil {
		m.Annotations = map[string]string{contract.AnnotationPolicyFor: *policyFor}
	}
	return &m
}

// webAndOther are two labelled policies selecting app=server: web admits
// app=client on the named port http, other admits app=other.
func webAndOther() (web, other *networkingv1.NetworkPolicy) {
	web = policy("web", func(p *networkingv1.NetworkPolicy) {
		p.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{from("client")},
			Ports: []networkingv1.NetworkPolicyPort{tcp(intstr.FromString("http"), nil)}}}
	})
	other = policy("other", func(p *networkingv1.NetworkPolicy) {
		p.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{from("other")}}}
	})
	return web, other
}

// labelledMulti is the policy as a MultiNetworkPolicy without policy-for,
// with the netclass label and the NetworkPolicy scoping annotation.
func labelledMulti(p *networkingv1.NetworkPolicy) *mnpv1beta1.MultiNetworkPolicy {
	m := multi(p, nil)
	m.Labels = p.Labels
	m.Annotations = map[string]string{contract.AnnotationPolicyNetworks: "blue"}
	return m
}

func TestCompileAllMulti(t *testing.T) {
	target := Target{Namespace: "t1", Labels: map[string]string{"app": "server"}, Network: blue,
		Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}
	res := peersByLabel{"client": "10.0.0.2", "other": "10.0.0.3"}
	web, other := webAndOther()
	webPlan, _, err := Compile([]*networkingv1.NetworkPolicy{web}, target, res)
	if err != nil || !webPlan.Ingress.Isolated || len(webPlan.Ingress.Allow) != 1 {
		t.Fatalf("the labelled policy's plan: %+v, %v", webPlan, err)
	}
	otherPlan, _, _ := Compile([]*networkingv1.NetworkPolicy{other}, target, res)
	bothPlan := netpol.Plan{Ingress: netpol.Direction{Isolated: true, Allow: append(slices.Clone(webPlan.Ingress.Allow), otherPlan.Ingress.Allow...)}}
	tests := []struct {
		name      string
		in        Policies
		want      netpol.Plan
		nps, mnps []string
	}{
		{name: "policy-for naming the PodNetwork: as the labelled policy", in: Policies{Multi: []*mnpv1beta1.MultiNetworkPolicy{multi(web, ptr.To("blue"))}},
			want: webPlan, mnps: []string{"web"}},
		{name: "in a list, spaced", in: Policies{Multi: []*mnpv1beta1.MultiNetworkPolicy{multi(web, ptr.To(" red , blue "))}},
			want: webPlan, mnps: []string{"web"}},
		{name: "policy-for naming another network: ignored", in: Policies{Multi: []*mnpv1beta1.MultiNetworkPolicy{multi(web, ptr.To("red, t1/blue"))}}},
		{name: "no policy-for: ignored", in: Policies{Multi: []*mnpv1beta1.MultiNetworkPolicy{multi(web, nil)}}},
		{name: "the label or the netclass annotation of a NetworkPolicy do not make it apply",
			in: Policies{Multi: []*mnpv1beta1.MultiNetworkPolicy{labelledMulti(web)}}},
		{name: "the union with a labelled NetworkPolicy: NetworkPolicies first", in: Policies{
			NetworkPolicies: []*networkingv1.NetworkPolicy{web}, Multi: []*mnpv1beta1.MultiNetworkPolicy{multi(other, ptr.To("blue"))}},
			want: bothPlan, nps: []string{"web"}, mnps: []string{"other"}},
		{name: "a NetworkPolicy and a MultiNetworkPolicy both named web", in: Policies{
			NetworkPolicies: []*networkingv1.NetworkPolicy{web}, Multi: []*mnpv1beta1.MultiNetworkPolicy{multi(web, ptr.To("blue"))}},
			want: netpol.Plan{Ingress: netpol.Direction{Isolated: true, Allow: append(slices.Clone(webPlan.Ingress.Allow), webPlan.Ingress.Allow...)}},
			nps:  []string{"web"}, mnps: []string{"web"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			plan, sel, err := CompileAll(tc.in, target, res)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(plan, tc.want) {
				t.Errorf("plan %+v, want %+v", plan, tc.want)
			}
			if !slices.Equal(sel.NetworkPolicies, tc.nps) || !slices.Equal(sel.MultiNetworkPolicies, tc.mnps) {
				t.Errorf("selected %+v, want NetworkPolicies %v MultiNetworkPolicies %v", sel, tc.nps, tc.mnps)
			}
		})
	}
}

// A rule of a MultiNetworkPolicy that cannot be compiled is reported as
// the MultiNetworkPolicy's.
func TestCompileAllMultiRuleError(t *testing.T) {
	bad := policy("bad", func(p *networkingv1.NetworkPolicy) {
		p.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{tcp(intstr.FromInt32(70000), nil)}}}
	})
	target := Target{Namespace: "t1", Labels: map[string]string{"app": "server"}, Network: blue}
	_, _, err := CompileAll(Policies{NetworkPolicies: []*networkingv1.NetworkPolicy{bad}, Multi: []*mnpv1beta1.MultiNetworkPolicy{multi(bad, ptr.To("blue"))}}, target, peersByLabel{})
	res := RuleErrors(err)
	if len(res) != 2 || res[0].Kind != "" || res[1].Kind != KindMultiNetworkPolicy {
		t.Fatalf("rule errors %v", err)
	}
	if !strings.HasPrefix(res[1].Error(), "MultiNetworkPolicy t1/bad ingress[0]:") || !strings.HasPrefix(res[0].Error(), "NetworkPolicy t1/bad ingress[0]:") {
		t.Errorf("errors %q, %q", res[0], res[1])
	}
	var re *RuleError
	if !errors.As(err, &re) {
		t.Error("errors.As finds no RuleError")
	}
}
