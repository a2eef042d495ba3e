package policyeval

import (
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cnpv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/netclass-dev/netclass/api/contract"
)

func cluster(name string, tier cnpv1beta1.Tier, prio int32, action cnpv1beta1.ClusterNetworkPolicyRuleAction, from cnpv1beta1.ClusterNetworkPolicyIngressPeer, protos ...cnpv1beta1.ClusterNetworkPolicyProtocol) *cnpv1beta1.ClusterNetworkPolicy {
	return &cnpv1beta1.ClusterNetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{contract.PolicyControllerLabel: contract.PolicyController}},
		Spec: cnpv1beta1.ClusterNetworkPolicySpec{Tier: tier, Priority: prio,
			Subject: cnpv1beta1.ClusterNetworkPolicySubject{Namespaces: sel("team", "a")},
			Ingress: []cnpv1beta1.ClusterNetworkPolicyIngressRule{{Action: action, From: []cnpv1beta1.ClusterNetworkPolicyIngressPeer{from}, Protocols: protos}}},
	}
}

type clusterCase struct {
	name    string
	cluster []*cnpv1beta1.ClusterNetworkPolicy
	pols    []*networkingv1.NetworkPolicy
	src     Pod
	proto   corev1.Protocol
	port    int32
	want    bool
}

var (
	web = Pod{Namespace: "a", Name: "web", Labels: map[string]string{"app": "web"}, Addr: netip.MustParseAddr("10.0.0.1"),
		Ports: []corev1.ContainerPort{{Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP}}}
	teams = map[string]map[string]string{"a": {"team": "a"}, "b": {"team": "b"}}
)

// The oracle's reading of the tiers, case by case from the API's
// documentation (web's ingress).
func TestClusterTiers(t *testing.T) {
	for _, c := range clusterCases() {
		w := World{Policies: c.pols, Cluster: c.cluster, Namespaces: teams, Network: "net"}
		if got := w.Ingress(web, c.src, c.proto, c.port); got != c.want {
			t.Errorf("%s: ingress from %s/%s %s/%d = %v, want %v", c.name, c.src.Namespace, c.src.Name, c.proto, c.port, got, c.want)
		}
	}
	all := cnpv1beta1.ClusterNetworkPolicyIngressPeer{Namespaces: &metav1.LabelSelector{}}
	deny := cnpv1beta1.ClusterNetworkPolicyRuleActionDeny
	w := World{Cluster: cnps(cluster("b", cnpv1beta1.BaselineTier, 0, deny, all), cluster("z", cnpv1beta1.AdminTier, 9, deny, all),
		cluster("a", cnpv1beta1.AdminTier, 9, deny, all)), Namespaces: teams}
	if got := w.SelectingCluster(web); !slices.Equal(got, []string{"a", "z", "b"}) {
		t.Errorf("SelectingCluster: %v", got)
	}
}

func clusterCases() []clusterCase {
	ca := Pod{Namespace: "a", Name: "client", Labels: map[string]string{"app": "client"}, Addr: netip.MustParseAddr("10.0.0.2")}
	cb := Pod{Namespace: "b", Name: "client", Labels: map[string]string{"app": "client"}, Addr: netip.MustParseAddr("10.0.0.3")}
	all := cnpv1beta1.ClusterNetworkPolicyIngressPeer{Namespaces: &metav1.LabelSelector{}}
	teamB := cnpv1beta1.ClusterNetworkPolicyIngressPeer{Namespaces: sel("team", "b")}
	clientB := cnpv1beta1.ClusterNetworkPolicyIngressPeer{Pods: &cnpv1beta1.NamespacedPod{NamespaceSelector: *sel("team", "b"), PodSelector: *sel("app", "client")}}
	allowAll := policy("a", nil, from(networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{}}))
	denyAll := policy("a", nil, nil)
	admin, base := cnpv1beta1.AdminTier, cnpv1beta1.BaselineTier
	accept, deny, pass := cnpv1beta1.ClusterNetworkPolicyRuleActionAccept, cnpv1beta1.ClusterNetworkPolicyRuleActionDeny, cnpv1beta1.ClusterNetworkPolicyRuleActionPass
	named := cnpv1beta1.ClusterNetworkPolicyProtocol{DestinationNamedPort: "dns"}
	return []clusterCase{
		{"admin deny over a namespaced allow", cnps(cluster("d", admin, 1, deny, teamB)), pols(allowAll), cb, corev1.ProtocolTCP, 80, false},
		{"admin deny: another peer", cnps(cluster("d", admin, 1, deny, teamB)), pols(allowAll), ca, corev1.ProtocolTCP, 80, true},
		{"admin pass to a namespaced deny", cnps(cluster("p", admin, 1, pass, all), cluster("a", admin, 2, accept, all)), pols(denyAll), ca, corev1.ProtocolTCP, 80, false},
		{"admin accept over a namespaced deny", cnps(cluster("a", admin, 1, accept, all)), pols(denyAll), ca, corev1.ProtocolTCP, 80, true},
		{"baseline deny under no policy", cnps(cluster("d", base, 1, deny, all)), nil, ca, corev1.ProtocolTCP, 80, false},
		{"baseline not reached under a namespaced allow", cnps(cluster("d", base, 1, deny, all)), pols(allowAll), ca, corev1.ProtocolTCP, 80, true},
		{"baseline pass passes", cnps(cluster("p", base, 1, pass, all), cluster("d", base, 2, deny, all)), nil, ca, corev1.ProtocolTCP, 80, true},
		{"priority: the lower first", cnps(cluster("z", admin, 1, accept, clientB), cluster("a", admin, 2, deny, teamB)), nil, cb, corev1.ProtocolTCP, 80, true},
		{"priority: swapped", cnps(cluster("z", admin, 2, accept, clientB), cluster("a", admin, 1, deny, teamB)), nil, cb, corev1.ProtocolTCP, 80, false},
		{"equal priority: by name", cnps(cluster("z", admin, 1, accept, clientB), cluster("a", admin, 1, deny, teamB)), nil, cb, corev1.ProtocolTCP, 80, false},
		{"named port of any protocol", cnps(cluster("d", admin, 1, deny, all, named)), nil, ca, corev1.ProtocolUDP, 53, false},
		{"named port: another protocol", cnps(cluster("d", admin, 1, deny, all, named)), nil, ca, corev1.ProtocolTCP, 53, true},
		{"unlabelled", cnps(func() *cnpv1beta1.ClusterNetworkPolicy {
			p := cluster("d", admin, 1, deny, all)
			p.Labels = nil
			return p
		}()), nil, ca, corev1.ProtocolTCP, 80, true},
	}
}

func cnps(p ...*cnpv1beta1.ClusterNetworkPolicy) []*cnpv1beta1.ClusterNetworkPolicy { return p }

func pols(p ...*networkingv1.NetworkPolicy) []*networkingv1.NetworkPolicy { return p }
