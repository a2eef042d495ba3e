package vxlan

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/netclass-dev/netclass/conf/netconf"
	"github.com/netclass-dev/netclass/plugins/kernel/link"
	"github.com/netclass-dev/netclass/plugins/vxlan/vni"
	"github.com/netclass-dev/netclass/test/cnitest"
)

// TestVNIBelongsToOneNetwork: a VNI's devices are tagged with the network
// that created them; another network on the same VNI is refused (code 7,
// both names) without leaving anything, and its DEL never removes the owner's
// devices.
func TestVNIBelongsToOneNetwork(t *testing.T) {
	a, _ := twoNodes(t)
	a.Add(t, plugin, a.conf(t, "blue", 4711, "10.60.0.0/24", "10.60.0.10", "10.60.0.10", nil), cnitest.NewPod(t), "net1")
	for _, dev := range []string{"ncbr4711", "ncvx4711"} {
		out, err := exec.Command("ip", "-n", a.NS.Name, "-d", "link", "show", dev).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "alias netclass.dev/network=blue") {
			t.Fatalf("%s is not tagged with blue (%v):\n%s", dev, err, out)
		}
	}
	red := a.conf(t, "red", 4711, "10.61.0.0/24", "10.61.0.10", "10.61.0.10", nil)
	p := cnitest.NewPod(t)
	_, err := a.Exec(p.Call(plugin, "ADD", "net1", red))
	var e *types.Error
	if !errors.As(err, &e) || e.Code != types.ErrInvalidNetworkConfig || !strings.Contains(e.Msg, `"blue"`) || !strings.Contains(e.Msg, `"red"`) {
		t.Fatalf("ADD of red on VNI 4711: %v, want CNI error 7 naming both networks", err)
	}
	if p.NS.HasLink(t, "net1") {
		t.Error("the refused ADD left the pod's interface")
	}
	// red's DEL (nothing of its own is left) must not delete blue's devices.
	if _, err := a.Exec(p.Call(plugin, "DEL", "net1", red)); err != nil {
		t.Fatalf("DEL of the refused attachment: %v", err)
	}
	for _, dev := range []string{"ncbr4711", "ncvx4711"} {
		if !a.NS.HasLink(t, dev) {
			t.Fatalf("red's DEL removed blue's %s", dev)
		}
	}
	// red's only address was released: a red ADD on its own VNI succeeds.
	a.Add(t, plugin, a.conf(t, "red", 4712, "10.61.0.0/24", "10.61.0.10", "10.61.0.10", nil), cnitest.NewPod(t), "net1")
}

// TestNodeManagedDevicesOutliveTheLastPod: devices netclass-dra's node engine
// made (node-managed tag) are joined by pods and left in place by the last
// pod's DEL: their lifetime is the node daemon's.
func TestNodeManagedDevicesOutliveTheLastPod(t *testing.T) {
	a, _ := twoNodes(t)
	conf := a.conf(t, "blue", 4713, "10.62.0.0/24", "10.62.0.10", "10.62.0.10", nil)
	c, err := netconf.ParseVXLAN(conf)
	if err != nil {
		t.Fatal(err)
	}
	a.NS.Do(t, func() error {
		u, err := vni.ResolveUnderlay(c)
		if err != nil {
			return err
		}
		_, err = vni.Ensure(c, u, true)
		return err
	})
	p := cnitest.NewPod(t)
	a.Add(t, plugin, conf, p, "net1")
	if _, err := a.Exec(p.Call(plugin, "DEL", "net1", conf)); err != nil {
		t.Fatalf("DEL: %v", err)
	}
	for _, dev := range []string{"ncbr4713", "ncvx4713"} {
		if !a.NS.HasLink(t, dev) {
			t.Fatalf("the last pod's DEL removed the node daemon's %s", dev)
		}
		if alias := a.NS.Link(t, dev).Attrs().Alias; alias != link.NodeOwnerAlias("blue") {
			t.Errorf("%s: alias %q after ADD and DEL", dev, alias)
		}
	}
	if _, err := os.Stat(filepath.Join(a.dataDir, "locks", "vxlan-4713.lock")); err != nil {
		t.Errorf("the lock of devices that stay: %v", err)
	}
}
