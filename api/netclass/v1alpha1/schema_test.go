package v1alpha1_test

import (
	"testing"

	"github.com/netclass-dev/netclass/api/internal/crdschema"
)

// The schema tests run the cases through the API server's validation code
// (k8s.io/apiextensions-apiserver) offline; testbed_test.go runs the same
// cases against a real API server.

func TestClusterNetworkSchema(t *testing.T) {
	crdschema.RunOffline(t, crdschema.LoadRepo(t), clusterNetworkCases)
}

func TestNodeNetworkSchema(t *testing.T) {
	crdschema.RunOffline(t, crdschema.LoadRepo(t), nodeNetworkCases)
}

func TestNetworkSchema(t *testing.T) {
	crdschema.RunOffline(t, crdschema.LoadRepo(t), networkCases)
}

func TestNetworkQoSSchema(t *testing.T) {
	crdschema.RunOffline(t, crdschema.LoadRepo(t), networkQoSCases)
}
