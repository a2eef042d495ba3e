package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// No shipped binary links a harness of test/ or the testing package:
// netclass-demo's runner and traffic checks live in demo/.
func TestBinariesShipNoTestCode(t *testing.T) {
	cmds, err := filepath.Glob("../netclass-*")
	if err != nil || len(cmds) < 2 {
		t.Fatalf("commands under cmd/: %v %v", cmds, err)
	}
	for _, cmd := range cmds {
		out, err := exec.Command("go", "list", "-deps", "./"+cmd).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", cmd, err)
		}
		for _, pkg := range strings.Fields(string(out)) {
			if pkg == "testing" || strings.HasPrefix(pkg, "github.com/netclass-dev/netclass/test/") {
				t.Errorf("%s links %s", filepath.Base(cmd), pkg)
			}
		}
	}
}
