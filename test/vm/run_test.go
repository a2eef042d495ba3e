package vm

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestModuleRoot(t *testing.T) {
	root := t.TempDir()
	nested := filepath.Join(root, "plugins", "bridge")
	if err := os.MkdirAll(nested, 0o755); err != nil {
		t.Fatal(err)
	}
	if got := moduleRoot(nested); got != "" {
		t.Fatalf("moduleRoot without a go.mod = %q, want none", got)
	}
	if err := os.WriteFile(filepath.Join(root, "go.mod"), []byte("module x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{root, nested} {
		if got := moduleRoot(dir); got != root {
			t.Errorf("moduleRoot(%q) = %q, want %q", dir, got, root)
		}
	}
}

// TestSpecBindsTheModuleRoot: a checkout under /tmp stays visible in the
// guest beyond the package directory (its bin/ and .cache/ for instance).
func TestSpecBindsTheModuleRoot(t *testing.T) {
	root := t.TempDir()
	pkg := filepath.Join(root, "plugins", "bridge")
	if err := os.MkdirAll(pkg, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "go.mod"), []byte("module x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	prog := filepath.Join(pkg, "bridge.test")
	if err := os.WriteFile(prog, []byte("#!/bin/true\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	sp, err := newSpec(Config{}, Command{Path: prog, Dir: pkg})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(sp.Binds, root) {
		t.Fatalf("binds %v do not include the module root %s", sp.Binds, root)
	}
}
