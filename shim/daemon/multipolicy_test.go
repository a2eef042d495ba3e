package daemon

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
)

// MultiNetworkPolicies are watched only when the API server serves them.
func TestServesMulti(t *testing.T) {
	tests := []struct {
		name      string
		resources []*metav1.APIResourceList
		want      bool
	}{
		{"no such group", nil, false},
		{"the group without the resource", []*metav1.APIResourceList{{GroupVersion: "k8s.cni.cncf.io/v1beta1",
			APIResources: []metav1.APIResource{{Name: "other"}}}}, false},
		{"served", []*metav1.APIResourceList{{GroupVersion: "k8s.cni.cncf.io/v1beta1",
			APIResources: []metav1.APIResource{{Name: "multi-networkpolicies", Kind: "MultiNetworkPolicy", Namespaced: true}}}}, true},
	}
	for _, tc := range tests {
		dc := fake.NewClientset().Discovery().(*fakediscovery.FakeDiscovery)
		dc.Resources = tc.resources
		got, err := servesMulti(dc)
		if err != nil || got != tc.want {
			t.Errorf("%s: %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
}
