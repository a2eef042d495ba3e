//go:build testbed

package v1alpha1_test

import (
	"testing"
	"time"

	"github.com/netclass-dev/netclass/api/internal/crdschema"
	"github.com/netclass-dev/netclass/test/testbed"
)

// The same cases as schema_test.go, against the test bed's API server
// (make testbed-up; go test -tags testbed). The CRDs of conf/crd are
// server-side applied and left installed; every object a case creates is
// deleted again, creates of the cases themselves are dry-run.

func liveServer(t *testing.T) *crdschema.Server {
	t.Helper()
	s, err := crdschema.NewServer(testbed.RestConfig(t), crdschema.LoadRepo(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.InstallCRDs(testbed.Context(t, 2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestLiveClusterNetworkSchema(t *testing.T) {
	crdschema.RunLive(t, liveServer(t), clusterNetworkCases)
}

func TestLiveNodeNetworkSchema(t *testing.T) {
	crdschema.RunLive(t, liveServer(t), nodeNetworkCases)
}

func TestLiveNetworkSchema(t *testing.T) {
	crdschema.RunLive(t, liveServer(t), networkCases)
}

func TestLiveNetworkQoSSchema(t *testing.T) {
	crdschema.RunLive(t, liveServer(t), networkQoSCases)
}
