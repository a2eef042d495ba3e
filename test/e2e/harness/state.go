package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/netclass-dev/netclass/shim/checkpoint"
)

// Checkpoint reads the daemon's claim records without touching them (the
// running daemon owns the directory).
func (e *Env) Checkpoint() ([]*checkpoint.Claim, error) {
	dir := filepath.Join(e.DRA.StateDir, "claims")
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

// Attachment finds the recorded attachment of a pod's interface.
func (e *Env) Attachment(t testing.TB, pod types.UID, ifname string) checkpoint.Attachment {
	t.Helper()
	claims, err := e.Checkpoint()
	if err != nil {
		t.Fatalf("read netclass-dra's checkpoint: %v", err)
	}
	for _, c := range claims {
		for _, d := range c.Devices {
			for _, a := range d.Attachments {
				if a.PodUID == pod && a.IfName == ifname {
					return a
				}
			}
		}
	}
	t.Fatalf("no attachment of %s for pod %s in the checkpoint", ifname, pod)
	return checkpoint.Attachment{}
}
