package bridge

import (
	"errors"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/netclass-dev/netclass/test/cnitest"
)

// TestBridgeBelongsToOneNetwork: the bridge a network creates is tagged with
// it; another network naming the same bridge is refused (code 7, both names)
// and leaves nothing behind; an admin's untagged bridge is joined untagged.
func TestBridgeBelongsToOneNetwork(t *testing.T) {
	h := cnitest.NewHost(t)
	blue := newNetwork(t, "blue", "shared0", []string{"10.10.5.0/30"}, nil)
	h.Add(t, plugin, blue.bytes(t), cnitest.NewPod(t), "net1")
	if out := output(t, "ip", "-n", h.NS.Name, "-d", "link", "show", "shared0"); !strings.Contains(out, "alias netclass.dev/network=blue") {
		t.Fatalf("the bridge blue created is not tagged with it:\n%s", out)
	}

	red := newNetwork(t, "red", "shared0", []string{"10.10.6.0/30"}, nil)
	p := cnitest.NewPod(t)
	_, err := h.Exec(p.Call(plugin, "ADD", "net1", red.bytes(t)))
	var e *types.Error
	if !errors.As(err, &e) || e.Code != types.ErrInvalidNetworkConfig || !strings.Contains(e.Msg, `"blue"`) || !strings.Contains(e.Msg, `"red"`) {
		t.Fatalf("ADD of red on blue's bridge: %v, want CNI error 7 naming both networks", err)
	}
	assertNoRecord(t, red, p)
	if p.NS.HasLink(t, "net1") {
		t.Error("the refused ADD left the pod's interface")
	}
	// /30: red's only address is free again, so a good ADD of red elsewhere succeeds.
	red.conf["bridge"] = "red0"
	h.Add(t, plugin, red.bytes(t), cnitest.NewPod(t), "net1")

	run(t, "ip", "-n", h.NS.Name, "link", "add", "admin0", "type", "bridge")
	green := newNetwork(t, "green", "admin0", []string{"10.10.7.0/30"}, nil)
	h.Add(t, plugin, green.bytes(t), cnitest.NewPod(t), "net1")
	if out := output(t, "ip", "-n", h.NS.Name, "-d", "link", "show", "admin0"); strings.Contains(out, "alias") {
		t.Fatalf("an admin's bridge was tagged:\n%s", out)
	}
}

func output(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := execCommand(name, args...)
	if err != nil {
		t.Fatalf("%s %v: %v: %s", name, args, err, out)
	}
	return string(out)
}
