package v1alpha1_test

import (
	"reflect"
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
	scheme := newScheme(t)
	tests := []struct {
		kind string
		obj  runtime.Object
	}{
		{"ClusterNetwork", &v1alpha1.ClusterNetwork{}},
		{"ClusterNetworkList", &v1alpha1.ClusterNetworkList{}},
		{"NodeNetwork", &v1alpha1.NodeNetwork{}},
		{"NodeNetworkList", &v1alpha1.NodeNetworkList{}},
		{"Network", &v1alpha1.Network{}},
		{"NetworkList", &v1alpha1.NetworkList{}},
		{"NetworkQoS", &v1alpha1.NetworkQoS{}},
		{"NetworkQoSList", &v1alpha1.NetworkQoSList{}},
	}
	for _, tc := range tests {
		t.Run(tc.kind, func(t *testing.T) {
			gvk := v1alpha1.SchemeGroupVersion.WithKind(tc.kind)
			obj, err := scheme.New(gvk)
			if err != nil {
				t.Fatalf("scheme.New(%s): %v", gvk, err)
			}
			if reflect.TypeOf(obj) != reflect.TypeOf(tc.obj) {
				t.Fatalf("scheme.New(%s) = %T, want %T", gvk, obj, tc.obj)
			}
			gvks, _, err := scheme.ObjectKinds(tc.obj)
			if err != nil || len(gvks) != 1 || gvks[0] != gvk {
				t.Fatalf("ObjectKinds(%T) = %v, %v; want [%s]", tc.obj, gvks, err, gvk)
			}
		})
	}
	if got := roundtrip.Kinds(scheme, v1alpha1.SchemeGroupVersion); len(got) != len(tests) {
		t.Errorf("scheme registers %v, the test knows %d kinds", got, len(tests))
	}
}

func TestDeepCopyAndJSONRoundTrip(t *testing.T) {
	roundtrip.Test(t, newScheme(t), v1alpha1.SchemeGroupVersion)
}
