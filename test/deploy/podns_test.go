//go:build testbed

package deploy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	demotraffic "github.com/netclass-dev/netclass/demo/traffic"
	"github.com/netclass-dev/netclass/shim/checkpoint"
	"github.com/netclass-dev/netclass/test/testbed/bed"
)

// podNetNS is the network namespace of a pod's net1 on node n (the primary node: its
// paths are this machine's), from the checkpoint of the chart's netclass-dra there (its
// --state-dir is the node's /var/lib/netclass).
func podNetNS(t *testing.T, n bed.Node, pod string, uid types.UID) *demotraffic.NS {
	t.Helper()
	dir := n.HostPath(filepath.Join("/var/lib/netclass", "claims"))
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, ent := range entries {
		raw, err := os.ReadFile(filepath.Join(dir, ent.Name()))
		if err != nil || !strings.HasSuffix(ent.Name(), ".json") {
			continue
		}
		c, err := checkpoint.Decode(raw)
		if err != nil {
			t.Fatalf("%s: %v", ent.Name(), err)
		}
		for _, dev := range c.Devices {
			for _, a := range dev.Attachments {
				if a.PodUID == uid && a.IfName == "net1" {
					return &demotraffic.NS{Name: pod, Path: a.NetNS}
				}
			}
		}
	}
	t.Fatalf("no attachment of pod %s in %s", pod, dir)
	return nil
}
