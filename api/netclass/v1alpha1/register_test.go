package v1alpha1_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/netclass-dev/netclass/api/internal/roundtrip"
	"github.com/netclass-dev/netclass/api/netclass/v1alpha1"
)

func newScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return scheme
}

func TestSchemeRegistersEveryKind(t *testing.T) {
	if got, want := v1alpha1.SchemeGroupVersion.String(), "netclass.dev/v1alpha1"; got != want {
		t.Fatalf("SchemeGroupVersion = %s, want %s", got, want)
	}
	roundtrip.CheckKinds(t, newScheme(t), v1alpha1.SchemeGroupVersion, map[string]runtime.Object{
		"ClusterNetwork":     &v1alpha1.ClusterNetwork{},
		"ClusterNetworkList": &v1alpha1.ClusterNetworkList{},
		"NodeNetwork":        &v1alpha1.NodeNetwork{},
		"NodeNetworkList":    &v1alpha1.NodeNetworkList{},
		"Network":            &v1alpha1.Network{},
		"NetworkList":        &v1alpha1.NetworkList{},
		"NetworkQoS":         &v1alpha1.NetworkQoS{},
		"NetworkQoSList":     &v1alpha1.NetworkQoSList{},
	})
}

func TestDeepCopyAndJSONRoundTrip(t *testing.T) {
	roundtrip.Test(t, newScheme(t), v1alpha1.SchemeGroupVersion)
}
