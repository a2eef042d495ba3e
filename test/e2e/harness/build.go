// Package harness runs netclass on the Kubernetes test bed for the
// conformance, end-to-end and benchmark tests: it builds netclass-dra and the
// CNI plugins from the working tree, runs netclass-dra as a subprocess on the
// host (as its own service account, so the RBAC of conf/deploy is what it
// gets), runs netclass-controller in-process, and creates the objects tests
// need in throwaway namespaces, deleting everything afterwards.
//
// Only one netclass-dra may serve the node at a time: the harness holds an
// exclusive lock (LockPath) while its daemon runs, so test packages that run
// in parallel take turns.
package harness

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/netclass-dev/netclass/test/repo"
)

// Plugins are the CNI plugins netclass-dra executes in these tests.
var Plugins = []string{"netclass-bridge", "netclass-vxlan", "netclass-qos", "netclass-vlan", "netclass-sriov"}

// Binaries are freshly built executables.
type Binaries struct {
	// DRA is the netclass-dra binary.
	DRA string
	// CNIDirs are searched in order: the fresh netclass plugins, then the
	// test bed's /opt/cni/bin (host-local, loopback, …). /opt/cni/bin is
	// never written to.
	CNIDirs []string
}

var buildOnce = sync.OnceValues(build)

// Build builds netclass-dra and the plugins once per test process.
func Build(t testing.TB) Binaries {
	t.Helper()
	b, err := buildOnce()
	if err != nil {
		t.Fatalf("build netclass: %v", err)
	}
	return b
}

func build() (Binaries, error) {
	root, err := repo.Root()
	if err != nil {
		return Binaries{}, err
	}
	dir, err := os.MkdirTemp("", "netclass-e2e-bin-")
	if err != nil {
		return Binaries{}, err
	}
	args := []string{"build", "-trimpath", "-o", dir + "/", "./cmd/netclass-dra"}
	for _, p := range Plugins {
		if _, err := os.Stat(filepath.Join(root, "cmd", p)); err == nil {
			args = append(args, "./cmd/"+p)
		}
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return Binaries{}, fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return Binaries{DRA: filepath.Join(dir, "netclass-dra"), CNIDirs: []string{dir, "/opt/cni/bin"}}, nil
}
