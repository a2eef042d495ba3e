package v1alpha1_test

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

func TestClusterNetworkSchema(t *testing.T) {
	crdschema.RunOffline(t, loadCRDs(t), clusterNetworkCases)
}

func TestNodeNetworkSchema(t *testing.T) {
	crdschema.RunOffline(t, loadCRDs(t), nodeNetworkCases)
}

func TestNetworkSchema(t *testing.T) {
	crdschema.RunOffline(t, loadCRDs(t), networkCases)
}

func TestNetworkQoSSchema(t *testing.T) {
	crdschema.RunOffline(t, loadCRDs(t), networkQoSCases)
}
