//go:build testbed

// Package e2e holds netclass's end-to-end tests on the Kubernetes test bed
// (`make testbed-up`, then `go test -tags testbed ./test/e2e/`): netclass-dra
// runs on the host as a subprocess, netclass-controller in-process, and pods
// attach to PodNetworks and Networks through ResourceClaims.
package e2e

import (
	"testing"

	"github.com/netclass-dev/netclass/test/e2e/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }
