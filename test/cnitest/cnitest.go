// Package cnitest runs CNI plugin binaries the way a container runtime does:
// as separate processes, with CNI_* environment and stdin, inside a "host"
// namespace the test created. It also finds or builds the binaries.
package cnitest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/netclass-dev/netclass/test/nstest"
	"github.com/netclass-dev/netclass/test/repo"
)

// EnvPath names a directory that already holds every plugin binary (the
// Makefile sets it after `make build`); without it the binaries are built
// once per test process.
const EnvPath = "NETCLASS_CNI_PATH"

// buildOnce is test-process-wide: building the binaries once per `go test`
// binary, not once per test, is what keeps the suite fast.
var buildOnce = sync.OnceValues(build)

// Plugins returns the directory of the netclass and upstream plugin binaries.
func Plugins(t testing.TB) string {
	t.Helper()
	if dir := os.Getenv(EnvPath); dir != "" {
		return dir
	}
	dir, err := buildOnce()
	if err != nil {
		t.Fatalf("build plugin binaries: %v", err)
	}
	return dir
}

func build() (string, error) {
	root, err := repo.Root()
	if err != nil {
		return "", err
	}
	// One directory per test process, named by its PID: Go has no exit hook
	// for a package-level build, so each build first removes the directories
	// of processes that are gone.
	removeStale(os.TempDir())
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("%s%d", buildPrefix, os.Getpid()))
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	args := []string{"build", "-o", dir + "/"}
	for _, p := range []string{"netclass-bridge", "netclass-vxlan", "netclass-qos", "netclass-vlan", "netclass-sriov", "netclass-nad"} {
		if _, err := os.Stat(filepath.Join(root, "cmd", p)); err == nil {
			args = append(args, "./cmd/"+p)
		}
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %w\n%s", err, out)
	}
	upstream := filepath.Join(root, ".cache", "cni")
	cmd = exec.Command(filepath.Join(root, "scripts", "upstream-cni.sh"), upstream)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("upstream plugins: %w\n%s", err, out)
	}
	entries, err := os.ReadDir(upstream)
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		if !e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			if err := os.Symlink(filepath.Join(upstream, e.Name()), filepath.Join(dir, e.Name())); err != nil {
				return "", err
			}
		}
	}
	return dir, nil
}

// buildPrefix names the per-process build directories under the temp dir.
const buildPrefix = "netclass-cnitest-"

// removeStale deletes build directories whose process no longer runs.
func removeStale(tmp string) {
	entries, _ := os.ReadDir(tmp)
	for _, e := range entries {
		pid, err := strconv.Atoi(strings.TrimPrefix(e.Name(), buildPrefix))
		if !e.IsDir() || !strings.HasPrefix(e.Name(), buildPrefix) || err != nil {
			continue
		}
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			os.RemoveAll(filepath.Join(tmp, e.Name()))
		}
	}
}

// Host is where plugins run: a namespace standing in for a node.
type Host struct {
	NS  *nstest.NS
	Dir string // plugin binaries
}

// NewHost creates a fresh host namespace.
func NewHost(t testing.TB) *Host {
	t.Helper()
	return &Host{NS: nstest.New(t), Dir: Plugins(t)}
}

// Call is one plugin invocation.
type Call struct {
	Plugin      string
	Command     string
	ContainerID string
	NetNS       string
	IfName      string
	Args        string // CNI_ARGS
	Conf        []byte
}

// Exec runs the call in the host namespace. A plugin that fails returns its
// CNI error JSON as *types.Error; a plugin that fails without one returns an
// error with its output.
func (h *Host) Exec(c Call) ([]byte, error) {
	stdout, _, err := h.Run(c)
	return stdout, err
}

// Run is Exec that also returns what the plugin wrote to stderr (its
// diagnostics and warnings).
func (h *Host) Run(c Call) (stdout, stderr []byte, err error) {
	var out, errOut bytes.Buffer
	err = h.NS.Run(func() error {
		cmd := exec.Command(filepath.Join(h.Dir, c.Plugin))
		cmd.Env = []string{
			"CNI_COMMAND=" + c.Command, "CNI_CONTAINERID=" + c.ContainerID, "CNI_NETNS=" + c.NetNS,
			"CNI_IFNAME=" + c.IfName, "CNI_ARGS=" + c.Args, "CNI_PATH=" + h.Dir, "PATH=" + os.Getenv("PATH"),
		}
		cmd.Stdin = bytes.NewReader(c.Conf)
		cmd.Stdout, cmd.Stderr = &out, &errOut
		return cmd.Run()
	})
	if err == nil {
		return out.Bytes(), errOut.Bytes(), nil
	}
	var e types.Error
	if json.Unmarshal(out.Bytes(), &e) == nil && e.Code != 0 {
		return out.Bytes(), errOut.Bytes(), &e
	}
	return out.Bytes(), errOut.Bytes(), fmt.Errorf("%s %s: %w\nstdout: %s\nstderr: %s", c.Plugin, c.Command, err, out.String(), errOut.String())
}

// CNI returns a libcni runner whose results cache lives in the test's temp dir.
func (h *Host) CNI(t testing.TB) *libcni.CNIConfig {
	return libcni.NewCNIConfigWithCacheDir([]string{h.Dir}, t.TempDir(), nil)
}

// Do runs fn (typically libcni calls) with the thread in the host namespace.
func (h *Host) Do(t testing.TB, fn func(ctx context.Context) error) {
	t.Helper()
	h.NS.Do(t, func() error { return fn(context.Background()) })
}
