package v1_test

import (
	"testing"

	"github.com/netclass-dev/netclass/api/internal/crdschema"
)

func loadCRDs(t *testing.T) map[string]*crdschema.CRD {
	t.Helper()
	dir, err := crdschema.Dir()
	if err != nil {
		t.Fatal(err)
	}
	crds, err := crdschema.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return crds
}

// The schema tests run the cases through the API server's validation code
// (k8s.io/apiextensions-apiserver) offline; testbed_test.go runs the same
// cases against a real API server.

func TestSeedExamplesApply(t *testing.T) {
	crdschema.RunOffline(t, loadCRDs(t), seedCases(t))
}

func TestNetworkClassSchema(t *testing.T) {
	crdschema.RunOffline(t, loadCRDs(t), networkClassCases)
}

func TestPodNetworkSchema(t *testing.T) {
	crdschema.RunOffline(t, loadCRDs(t), podNetworkCases)
}
