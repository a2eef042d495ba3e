// Package repo locates the netclass checkout tests run from, for harnesses
// that build its binaries or read its files (conf/crd, conf/deploy).
package repo

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Root returns the directory of the netclass module's go.mod.
func Root() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("not inside the netclass module")
	}
	return filepath.Dir(gomod), nil
}
