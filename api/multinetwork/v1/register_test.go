package v1_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/netclass-dev/netclass/api/internal/roundtrip"
	v1 "github.com/netclass-dev/netclass/api/multinetwork/v1"
)

func newScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := v1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return scheme
}

func TestSchemeRegistersEveryKind(t *testing.T) {
	if got, want := v1.SchemeGroupVersion.String(), "multinetwork.networking.k8s.io/v1"; got != want {
		t.Fatalf("SchemeGroupVersion = %s, want %s", got, want)
	}
	roundtrip.CheckKinds(t, newScheme(t), v1.SchemeGroupVersion, map[string]runtime.Object{
		"NetworkClass":     &v1.NetworkClass{},
		"NetworkClassList": &v1.NetworkClassList{},
		"PodNetwork":       &v1.PodNetwork{},
		"PodNetworkList":   &v1.PodNetworkList{},
	})
}

func TestDeepCopyAndJSONRoundTrip(t *testing.T) {
	roundtrip.Test(t, newScheme(t), v1.SchemeGroupVersion)
}
