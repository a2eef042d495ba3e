// Package examples holds the runnable example network configurations of the
// README; its tests prove every one of them is valid, and run them with
// cnitool, the way the README shows.
package examples

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"

	"github.com/netclass-dev/netclass/conf/netconf"
)

// TestExamplesAreValid parses every example conflist and validates each
// netclass plugin in it exactly as the plugin would.
func TestExamplesAreValid(t *testing.T) {
	for _, f := range conflists(t) {
		t.Run(f, func(t *testing.T) {
			list, err := libcni.ConfListFromFile(f)
			if err != nil {
				t.Fatal(err)
			}
			netclass := 0
			for _, p := range list.Plugins {
				var m map[string]any
				if err := json.Unmarshal(p.Bytes, &m); err != nil {
					t.Fatal(err)
				}
				typ, _ := m["type"].(string)
				if !strings.HasPrefix(typ, "netclass-") {
					continue
				}
				m["cniVersion"], m["name"] = list.CNIVersion, list.Name
				b, _ := json.Marshal(m)
				if _, err := netconf.Parse(b); err != nil {
					t.Errorf("%s: %v", typ, err)
				}
				netclass++
			}
			if netclass == 0 {
				t.Error("the example uses no netclass plugin")
			}
		})
	}
}

// TestEveryExampleIsDocumented looks in the README and the plugins' own
// READMEs (plugins/*/README.md).
func TestEveryExampleIsDocumented(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	more := glob(t, "../../plugins/*/README.md")
	for _, m := range more {
		b, err := os.ReadFile(m)
		if err != nil {
			t.Fatal(err)
		}
		readme = append(readme, b...)
	}
	for _, f := range conflists(t) {
		if !strings.Contains(string(readme), "conf/examples/"+f) {
			t.Errorf("neither README.md nor a plugins/*/README.md mentions conf/examples/%s", f)
		}
	}
}

// conflists lists the examples; none (or a failed listing) fails the test,
// so a test over them never passes on nothing.
func conflists(t *testing.T) []string {
	t.Helper()
	return glob(t, "*.conflist")
}

// glob lists the files matching pattern, failing the test when there are none.
func glob(t *testing.T, pattern string) []string {
	t.Helper()
	files, err := filepath.Glob(pattern)
	if err != nil || len(files) == 0 {
		t.Fatalf("no files match %s: %v", pattern, err)
	}
	return files
}
