package v1_test

import (
	"reflect"
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
	scheme := newScheme(t)
	tests := []struct {
		kind string
		obj  runtime.Object
	}{
		{"NetworkClass", &v1.NetworkClass{}},
		{"NetworkClassList", &v1.NetworkClassList{}},
		{"PodNetwork", &v1.PodNetwork{}},
		{"PodNetworkList", &v1.PodNetworkList{}},
	}
	for _, tc := range tests {
		t.Run(tc.kind, func(t *testing.T) {
			gvk := v1.SchemeGroupVersion.WithKind(tc.kind)
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
	if got := roundtrip.Kinds(scheme, v1.SchemeGroupVersion); len(got) != len(tests) {
		t.Errorf("scheme registers %v, the test knows %d kinds", got, len(tests))
	}
}

func TestDeepCopyAndJSONRoundTrip(t *testing.T) {
	roundtrip.Test(t, newScheme(t), v1.SchemeGroupVersion)
}
