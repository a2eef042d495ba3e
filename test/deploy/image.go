//go:build testbed

package deploy

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/netclass-dev/netclass/test/repo"
	"github.com/netclass-dev/netclass/test/testbed/bed"
)

// Image is the name conf/deploy's workloads run.
const Image = "localhost/netclass/netclass:latest"

// buildImage builds every binary the image holds (static, as `make build`)
// and the image archive of scripts/image.sh, in a temporary directory.
func buildImage(t *testing.T) string {
	t.Helper()
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	return buildImageFrom(t, root, Image)
}

// buildImageFrom builds the image named name from the checkout at root.
func buildImageFrom(t *testing.T, root, name string) string {
	t.Helper()
	bin := t.TempDir()
	cmds, err := filepath.Glob(filepath.Join(root, "cmd", "netclass-*"))
	if err != nil || len(cmds) == 0 {
		t.Fatalf("no commands under %s/cmd/: %v", root, err)
	}
	args := []string{"build", "-trimpath", "-ldflags=-s -w", "-o", bin + "/"}
	for _, c := range cmds {
		if filepath.Base(c) != "netclass-demo" {
			args = append(args, "./cmd/"+filepath.Base(c))
		}
	}
	run(t, root, []string{"CGO_ENABLED=0"}, "go", args...)
	tar := filepath.Join(t.TempDir(), "netclass-image.tar")
	run(t, root, []string{"BIN=" + bin}, "scripts/image.sh", tar, name)
	return tar
}

func run(t *testing.T, dir string, env []string, name string, args ...string) {
	t.Helper()
	if out, err := runOut(dir, env, name, args...); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// runOut runs a command and returns its combined output.
func runOut(dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// hostFiles restores files and directories of every node the deployment
// writes to (the DaemonSet's init container installs the plugins into
// /opt/cni/bin, netclass-dra keeps its state in /var/lib/netclass) when the
// test ends: a file's former content or its absence, a directory's former
// entries (what was added goes) or its absence. Each node's path is taken
// where it is on this machine.
func hostFiles(t *testing.T, nodes []bed.Node, nodePaths ...string) {
	t.Helper()
	var restores []func() error
	for _, n := range nodes {
		for _, p := range nodePaths {
			restore, err := saveHostPath(n.HostPath(p))
			if err != nil {
				t.Fatal(err)
			}
			restores = append(restores, restore)
		}
	}
	t.Cleanup(func() {
		for _, restore := range restores {
			if err := restore(); err != nil {
				t.Error(err)
			}
		}
	})
}

// saveHostPath records a path and returns what puts it back.
func saveHostPath(p string) (func() error, error) {
	fi, err := os.Stat(p)
	switch {
	case os.IsNotExist(err):
		return func() error { return os.RemoveAll(p) }, nil
	case err != nil:
		return nil, err
	case fi.IsDir():
		entries, err := os.ReadDir(p)
		if err != nil {
			return nil, err
		}
		had := map[string]bool{}
		for _, e := range entries {
			had[e.Name()] = true
		}
		return func() error {
			now, err := os.ReadDir(p)
			if err != nil {
				return fmt.Errorf("restore %s: %w", p, err)
			}
			for _, e := range now {
				if !had[e.Name()] {
					if err := os.RemoveAll(filepath.Join(p, e.Name())); err != nil {
						return fmt.Errorf("restore %s: %w", p, err)
					}
				}
			}
			return nil
		}, nil
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	return func() error {
		tmp := filepath.Join(filepath.Dir(p), "."+filepath.Base(p)+".restore")
		if err := os.WriteFile(tmp, data, fi.Mode()); err != nil {
			return fmt.Errorf("restore %s: %w", p, err)
		}
		if err := os.Rename(tmp, p); err != nil {
			return fmt.Errorf("restore %s: %w", p, err)
		}
		return nil
	}, nil
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
