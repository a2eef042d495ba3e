package daemon

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
)

// MultiNetworkPolicies and ClusterNetworkPolicies are watched only when
// the API server serves them.
func TestServes(t *testing.T) {
	tests := []struct {
		name         string
		gv, resource string
		resources    []*metav1.APIResourceList
		want         bool
	}{
		{"no such group", "k8s.cni.cncf.io/v1beta1", multiResource, nil, false},
		{"the group without the resource", "k8s.cni.cncf.io/v1beta1", multiResource, []*metav1.APIResourceList{{GroupVersion: "k8s.cni.cncf.io/v1beta1",
			APIResources: []metav1.APIResource{{Name: "other"}}}}, false},
		{"served", "k8s.cni.cncf.io/v1beta1", multiResource, []*metav1.APIResourceList{{GroupVersion: "k8s.cni.cncf.io/v1beta1",
			APIResources: []metav1.APIResource{{Name: "multi-networkpolicies", Kind: "MultiNetworkPolicy", Namespaced: true}}}}, true},
		{"ClusterNetworkPolicy: only v1alpha2 served", "policy.networking.k8s.io/v1beta1", clusterResource, []*metav1.APIResourceList{{GroupVersion: "policy.networking.k8s.io/v1alpha2",
			APIResources: []metav1.APIResource{{Name: "clusternetworkpolicies"}}}}, false},
		{"ClusterNetworkPolicy served", "policy.networking.k8s.io/v1beta1", clusterResource, []*metav1.APIResourceList{{GroupVersion: "policy.networking.k8s.io/v1beta1",
			APIResources: []metav1.APIResource{{Name: "clusternetworkpolicies", Kind: "ClusterNetworkPolicy"}}}}, true},
	}
	for _, tc := range tests {
		dc := fake.NewClientset().Discovery().(*fakediscovery.FakeDiscovery)
		dc.Resources = tc.resources
		got, err := serves(dc, tc.gv, tc.resource)
		if err != nil || got != tc.want {
			t.Errorf("%s: %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
}
