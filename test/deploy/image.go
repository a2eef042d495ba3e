//go:build testbed

package deploy

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/netclass-dev/netclass/test/repo"
)

// Image is the name conf/deploy's workloads run.
const Image = "localhost/netclass/netclass:latest"

// node is what the test needs of the test bed's node, as its scripts define it.
type node struct {
	ctr, containerd string // ctr and the containerd socket it talks to
	netnsDir        string // where containerd mounts pod network namespaces
}

// testbedNode reads the test bed's paths from scripts/testbed/env.sh.
func testbedNode(t *testing.T) node {
	t.Helper()
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-c", `. scripts/testbed/env.sh && printf '%s\n' "$TESTBED_BIN/ctr" "$CONTAINERD_SOCKET" "$STATE_DIR"`)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("read scripts/testbed/env.sh: %v", err)
	}
	f := strings.Fields(string(out))
	if len(f) != 3 {
		t.Fatalf("scripts/testbed/env.sh gave %q, want ctr, socket and state dir", out)
	}
	return node{ctr: f[0], containerd: f[1], netnsDir: filepath.Join(f[2], "containerd", "io.containerd.grpc.v1.cri", "netns")}
}

// buildImage builds every binary the image holds (static, as `make build`)
// and the image archive of scripts/image.sh, in a temporary directory.
func buildImage(t *testing.T) string {
	t.Helper()
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	cmds, err := filepath.Glob(filepath.Join(root, "cmd", "netclass-*"))
	if err != nil || len(cmds) == 0 {
		t.Fatalf("no commands under cmd/: %v", err)
	}
	args := []string{"build", "-trimpath", "-ldflags=-s -w", "-o", bin + "/"}
	for _, c := range cmds {
		if filepath.Base(c) != "netclass-demo" {
			args = append(args, "./cmd/"+filepath.Base(c))
		}
	}
	run(t, root, []string{"CGO_ENABLED=0"}, "go", args...)
	tar := filepath.Join(t.TempDir(), "netclass-image.tar")
	run(t, root, []string{"BIN=" + bin}, "scripts/image.sh", tar, Image)
	return tar
}

// importImage imports the archive into the test bed's containerd and
// removes the image when the test ends.
func importImage(t *testing.T, n node, tar string) {
	t.Helper()
	ctr := []string{"--address", n.containerd, "--namespace", "k8s.io", "images"}
	run(t, "", nil, n.ctr, append(ctr, "import", "--platform", "linux/amd64", tar)...)
	t.Cleanup(func() {
		if out, err := exec.Command(n.ctr, append(ctr, "rm", Image)...).CombinedOutput(); err != nil {
			t.Errorf("remove image %s: %v\n%s", Image, err, out)
		}
	})
}

func run(t *testing.T, dir string, env []string, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out.String())
	}
}

// hostFiles restores files of the host the deployment writes to (the
// DaemonSet's init container installs the plugins into /opt/cni/bin) when
// the test ends: their former content, or their absence.
func hostFiles(t *testing.T, paths ...string) {
	t.Helper()
	type saved struct {
		data []byte
		mode os.FileMode
		ok   bool
	}
	before := make(map[string]saved, len(paths))
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			before[p] = saved{}
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		before[p] = saved{data: data, mode: fi.Mode(), ok: true}
	}
	t.Cleanup(func() {
		for p, s := range before {
			if !s.ok {
				if err := os.RemoveAll(p); err != nil {
					t.Errorf("remove %s: %v", p, err)
				}
				continue
			}
			tmp := filepath.Join(filepath.Dir(p), "."+filepath.Base(p)+".restore")
			if err := os.WriteFile(tmp, s.data, s.mode); err != nil {
				t.Errorf("restore %s: %v", p, err)
				continue
			}
			if err := os.Rename(tmp, p); err != nil {
				t.Errorf("restore %s: %v", p, err)
			}
		}
	})
}

// pluginPaths are the host paths of the plugins the image installs.
func pluginPaths(t *testing.T) []string {
	t.Helper()
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	cmds, _ := filepath.Glob(filepath.Join(root, "cmd", "netclass-*"))
	var out []string
	for _, c := range cmds {
		switch n := filepath.Base(c); n {
		case "netclass-dra", "netclass-controller", "netclass-demo":
		default:
			out = append(out, filepath.Join("/opt/cni/bin", n))
		}
	}
	if len(out) == 0 {
		t.Fatalf("no plugin commands under %s/cmd", root)
	}
	return out
}
