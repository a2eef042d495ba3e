package v1_test

import (
	"testing"

	"github.com/netclass-dev/netclass/api/internal/crdschema"
)

// The schema tests run the cases through the API server's validation code
// (k8s.io/apiextensions-apiserver) offline; testbed_test.go runs the same
// cases against a real API server.

func TestSeedExamplesApply(t *testing.T) {
	crdschema.RunOffline(t, crdschema.LoadRepo(t), seedCases(t))
}

func TestNetworkClassSchema(t *testing.T) {
	crdschema.RunOffline(t, crdschema.LoadRepo(t), networkClassCases)
}

func TestPodNetworkSchema(t *testing.T) {
	crdschema.RunOffline(t, crdschema.LoadRepo(t), podNetworkCases)
}
