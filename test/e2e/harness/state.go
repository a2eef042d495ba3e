package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/netclass-dev/netclass/shim/checkpoint"
	"github.com/netclass-dev/netclass/shim/render"
	"github.com/netclass-dev/netclass/test/testbed/bed"
)

// Checkpoint reads node 1's daemon's claim records (DRA.Checkpoint).
func (e *Env) Checkpoint() ([]*checkpoint.Claim, error) { return e.DRA.Checkpoint() }

// Checkpoint reads the daemon's claim records without touching them (the
// running daemon owns the directory).
func (d *DRA) Checkpoint() ([]*checkpoint.Claim, error) { return ReadCheckpoint(d.StateDir) }

// ReadCheckpoint reads the claim records of a netclass-dra whose --state-dir
// is stateDir (as seen from this machine), without touching them.
func ReadCheckpoint(stateDir string) ([]*checkpoint.Claim, error) {
	dir := filepath.Join(stateDir, "claims")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []*checkpoint.Claim
	for _, ent := range entries {
		if !strings.HasSuffix(ent.Name(), ".json") {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(dir, ent.Name()))
		if os.IsNotExist(err) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, err
		}
		c, err := checkpoint.Decode(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", ent.Name(), err)
		}
		out = append(out, c)
	}
	return out, nil
}

// Attachment finds the recorded attachment of a pod's interface on node 1.
func (e *Env) Attachment(t testing.TB, pod types.UID, ifname string) checkpoint.Attachment {
	t.Helper()
	return e.AttachmentOn(t, e.Nodes[0], pod, ifname)
}

// PodNetNS opens the network namespace of a pod's attachment, whichever
// node it runs on, for the rest of the test, and returns a path of it that
// setns accepts (/proc/self/fd/N). Another node's pod namespaces are
// mounted in that node's mount namespace only: they are reached through
// the root of a process there (the node's netclass-dra).
func (e *Env) PodNetNS(t testing.TB, node bed.Node, pod types.UID, ifname string) string {
	t.Helper()
	path := e.AttachmentOn(t, node, pod, ifname).NetNS
	if !node.Primary() {
		path = fmt.Sprintf("/proc/%d/root%s", e.DRAOn(node.Name).PID(), path)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("open the network namespace of pod %s on node %s: %v", pod, node.Name, err)
	}
	t.Cleanup(func() { f.Close() })
	return fmt.Sprintf("/proc/self/fd/%d", f.Fd())
}

// AttachmentOn finds the recorded attachment of a pod's interface in the
// checkpoint of the node's netclass-dra.
func (e *Env) AttachmentOn(t testing.TB, node bed.Node, pod types.UID, ifname string) checkpoint.Attachment {
	t.Helper()
	d := e.DRAOn(node.Name)
	if d == nil {
		t.Fatalf("no netclass-dra on node %s", node.Name)
	}
	claims, err := d.Checkpoint()
	if err != nil {
		t.Fatalf("read the checkpoint of node %s's netclass-dra: %v", node.Name, err)
	}
	a, ok := FindAttachment(claims, pod, ifname)
	if !ok {
		t.Fatalf("no attachment of %s for pod %s in the checkpoint", ifname, pod)
	}
	return a
}

// FindAttachment finds the attachment of a pod's interface in claim records.
func FindAttachment(claims []*checkpoint.Claim, pod types.UID, ifname string) (checkpoint.Attachment, bool) {
	for _, c := range claims {
		for _, d := range c.Devices {
			for _, a := range d.Attachments {
				if a.PodUID == pod && a.IfName == ifname {
					return a, true
				}
			}
		}
	}
	return checkpoint.Attachment{}, false
}

// hostStateDirs are where the plugins keep per-network state on the host.
var hostStateDirs = []string{render.IPAMStateDir, render.StateDir}

// ForgetNetwork registers a network's CNI name (and VNI, 0 for none) whose
// host state directories (on every node) the harness removes at the end of the package,
// once netclass-dra stopped — only when they hold no reservation any more,
// so a leak is left in place (and reported) rather than hidden.
func (e *Env) ForgetNetwork(cniName string, vni int32) {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	e.forget = append(e.forget, forgotten{cniName, vni})
}

type forgotten struct {
	cniName string
	vni     int32
}

func (e *Env) removeNetworkState() error {
	var leaks []string
	for _, n := range e.Nodes {
		leaks = append(leaks, e.removeNodeNetworkState(n)...)
	}
	if len(leaks) > 0 {
		return fmt.Errorf("host CNI state left behind: %s", strings.Join(leaks, "; "))
	}
	return nil
}

// removeNodeNetworkState removes the forgotten networks' state on one node
// (where its directories are on this machine) and returns the leaks.
func (e *Env) removeNodeNetworkState(n bed.Node) []string {
	var leaks []string
	for _, f := range e.forget {
		for _, root := range hostStateDirs {
			dir := n.HostPath(filepath.Join(root, f.cniName))
			entries, err := os.ReadDir(dir)
			if err != nil {
				continue
			}
			var held []string
			for _, ent := range entries {
				if n := ent.Name(); n != "lock" && !strings.HasPrefix(n, "last_reserved_ip") {
					held = append(held, n)
				}
			}
			if len(held) > 0 {
				leaks = append(leaks, fmt.Sprintf("%s (node %s) holds %v", dir, n.Name, held))
				continue
			}
			os.RemoveAll(dir)
		}
		if f.vni != 0 {
			os.Remove(n.HostPath(filepath.Join(render.StateDir, "locks", fmt.Sprintf("vxlan-%d.lock", f.vni))))
		}
	}
	return leaks
}
