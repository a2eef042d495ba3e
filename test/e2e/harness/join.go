package harness

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/netclass-dev/netclass/test/testbed"
	"github.com/netclass-dev/netclass/test/testbed/bed"
)

// JoinNode brings a new node into the running test bed (scripts/testbed/node.sh add) and
// runs a netclass-dra on it, as the package's other nodes have. The returned function makes
// the node leave again — daemon stopped, node removed, Node object gone — and is also run
// when the test ends if the test did not.
func (e *Env) JoinNode(t testing.TB) (bed.Node, func()) {
	t.Helper()
	ctx := testbed.Context(t, 5*time.Minute)
	n, err := bed.AddNode(ctx, "")
	if err != nil {
		t.Fatalf("add a node to the test bed: %v", err)
	}
	var once sync.Once
	var d *DRA
	leave := func() {
		once.Do(func() {
			if d != nil {
				if err := d.Stop(); err != nil {
					t.Errorf("stop netclass-dra on %s: %v", n.Name, err)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			if err := bed.RemoveNode(ctx, n.Name); err != nil {
				t.Errorf("remove node %s: %v", n.Name, err)
			}
		})
	}
	t.Cleanup(leave)
	kubeconfig, err := e.KubeconfigFor(n.Name)
	if err != nil {
		t.Fatal(err)
	}
	d = &DRA{Bin: e.Bins.DRA, Kubeconfig: kubeconfig, Node: n.Name, On: n, CNIDirs: e.Bins.CNIDirs,
		StateDir: filepath.Join(e.dir, "state-"+n.Name), LogPath: filepath.Join(e.dir, "netclass-dra-"+n.Name+".log")}
	if err := d.Start(time.Minute); err != nil {
		t.Fatalf("netclass-dra on the new node %s: %v", n.Name, err)
	}
	return n, leave
}

// FloodEntries are the remote VTEPs of a VXLAN device's all-zeros FDB entries on a node
// (nil when the device does not exist there).
func FloodEntries(ctx context.Context, n bed.Node, dev string) ([]string, error) {
	if _, err := n.Output(ctx, "ip", "link", "show", "dev", dev); err != nil {
		return nil, nil
	}
	out, err := n.Output(ctx, "bridge", "fdb", "show", "dev", dev)
	if err != nil {
		return nil, err
	}
	return parseFlood(out), nil
}

// parseFlood reads `bridge fdb show` lines "00:00:00:00:00:00 dst ADDR self permanent".
func parseFlood(out string) []string {
	var remotes []string
	for _, line := range splitLines(out) {
		var mac, dst, addr string
		if n, _ := fmt.Sscan(line, &mac, &dst, &addr); n == 3 && mac == "00:00:00:00:00:00" && dst == "dst" {
			remotes = append(remotes, addr)
		}
	}
	return remotes
}

func splitLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}
