package nodedevices_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/netclass-dev/netclass/plugins/kernel/link"
	"github.com/netclass-dev/netclass/plugins/vxlan/vni"
	"github.com/netclass-dev/netclass/shim/attachment"
	"github.com/netclass-dev/netclass/shim/network"
	"github.com/netclass-dev/netclass/shim/nodedevices"
	"github.com/netclass-dev/netclass/test/locktest"
	"github.com/netclass-dev/netclass/test/nstest"
)

// vxlanNet is an offered netclass-vxlan network over the node's 10.77.0.1.
func vxlanNet(name string, id int, remotes ...string) network.Network {
	rs := `[]`
	if len(remotes) > 0 {
		rs = `["` + strings.Join(remotes, `","`) + `"]`
	}
	return network.Network{
		Ref:    attachment.NetworkRef{Kind: "PodNetwork", Name: name},
		Type:   "netclass-vxlan",
		Config: []byte(fmt.Sprintf(`{"cniVersion":"1.1.0","name":%q,"type":"netclass-vxlan","vni":%d,"local":"10.77.0.1","remotes":%s}`, name, id, rs)),
	}
}

// node is a fresh namespace with an underlay veth holding 10.77.0.1.
func node(t *testing.T) *nstest.NS {
	ns := nstest.New(t)
	ns.Do(t, func() error {
		attrs := netlink.NewLinkAttrs()
		attrs.Name = "ul0"
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: attrs, PeerName: "ul0p"}); err != nil {
			return err
		}
		ul, err := netlink.LinkByName("ul0")
		if err != nil {
			return err
		}
		addr, _ := netlink.ParseAddr("10.77.0.1/24")
		if err := netlink.AddrAdd(ul, addr); err != nil {
			return err
		}
		return netlink.LinkSetUp(ul)
	})
	return ns
}

func flood(t *testing.T, ns *nstest.NS, dev string) []string {
	t.Helper()
	var out []string
	ns.Do(t, func() error {
		l, err := link.ByName(dev)
		if err != nil {
			return err
		}
		addrs, err := link.FloodEntries(l)
		for _, a := range addrs {
			out = append(out, a.String())
		}
		slices.Sort(out)
		return err
	})
	return out
}

func sync(t *testing.T, ns *nstest.NS, e *nodedevices.Engine, nets ...network.Network) (nodedevices.Result, error) {
	t.Helper()
	var res nodedevices.Result
	var err error
	ns.Do(t, func() error {
		res, err = e.Sync(context.Background(), nets)
		return nil
	})
	return res, err
}

// TestEngineFollowsTheCluster: the VNI devices appear with the network, their
// flood list follows the network's remotes in place (nodes joining and
// leaving), they stay while a pod uses them after the network went, and go
// with the last pod.
func TestEngineFollowsTheCluster(t *testing.T) {
	ns := node(t)
	e := &nodedevices.Engine{DataDirs: []string{t.TempDir(), t.TempDir()}} // the claims', the NADs'
	locks := lockFiles(e, "vxlan-4100")
	res, err := sync(t, ns, e, vxlanNet("blue", 4100, "10.77.0.2", "10.77.0.3"))
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Devices["blue"]; !slices.Equal(got, []string{"ncbr4100", "ncvx4100"}) {
		t.Fatalf("devices %v", res.Devices)
	}
	for _, dev := range []string{"ncbr4100", "ncvx4100"} {
		if l := ns.Link(t, dev); l.Attrs().Alias != link.NodeOwnerAlias("blue") {
			t.Errorf("%s has alias %q, want the node daemon's tag for blue", dev, l.Attrs().Alias)
		}
	}
	if got := flood(t, ns, "ncvx4100"); !slices.Equal(got, []string{"10.77.0.2", "10.77.0.3"}) {
		t.Fatalf("flood entries %v", got)
	}
	// node 3 left, node 4 joined: the same devices, the entries follow
	before := ns.Link(t, "ncvx4100").Attrs().Index
	if _, err := sync(t, ns, e, vxlanNet("blue", 4100, "10.77.0.2", "10.77.0.4")); err != nil {
		t.Fatal(err)
	}
	if got := flood(t, ns, "ncvx4100"); !slices.Equal(got, []string{"10.77.0.2", "10.77.0.4"}) {
		t.Fatalf("flood entries after a node left and another joined: %v", got)
	}
	if after := ns.Link(t, "ncvx4100").Attrs().Index; after != before {
		t.Fatalf("the vxlan device was re-created (index %d → %d): running pods would lose it", before, after)
	}
	// a pod is a port of the bridge: the network goes, the devices stay
	ns.Do(t, func() error {
		attrs := netlink.NewLinkAttrs()
		attrs.Name, attrs.MasterIndex = "pod0", ns.Link(t, "ncbr4100").Attrs().Index
		return netlink.LinkAdd(&netlink.Veth{LinkAttrs: attrs, PeerName: "pod0p"})
	})
	if res, err := sync(t, ns, e); err != nil || len(res.Removed) != 0 {
		t.Fatalf("with a pod still on the bridge: removed %v, %v", res.Removed, err)
	}
	if !ns.HasLink(t, "ncvx4100") || !ns.HasLink(t, "ncbr4100") {
		t.Fatal("devices removed while a pod uses them")
	}
	for _, lock := range locks {
		if _, err := os.Stat(lock); err != nil {
			t.Fatalf("the VNI's lock while its devices stay: %v", err)
		}
	}
	ns.Do(t, func() error { return link.Delete("pod0") })
	res, err = sync(t, ns, e)
	if err != nil {
		t.Fatal(err)
	}
	if ns.HasLink(t, "ncvx4100") || ns.HasLink(t, "ncbr4100") || len(res.Removed) != 2 {
		t.Fatalf("devices of a network that is gone, with no pod left: still there (removed %v)", res.Removed)
	}
	for _, lock := range locks {
		if _, err := os.Stat(lock); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("the VNI's lock file outlived its devices: %v", err)
		}
	}
}

// lockFiles are the paths of the lock name in each of e's dataDirs.
func lockFiles(e *nodedevices.Engine, name string) []string {
	var out []string
	for _, dir := range e.DataDirs {
		out = append(out, filepath.Join(dir, "locks", name+".lock"))
	}
	return out
}

// TestEngineWaitsForEveryDataDirsPlugins: the devices of a network that
// went are not removed while a plugin of the second dataDir (a generated
// NAD's, joining them for a Multus pod) holds the segment's lock there; they
// go once it is released, with the lock files of both dataDirs.
func TestEngineWaitsForEveryDataDirsPlugins(t *testing.T) {
	ns := node(t)
	claims, nads := t.TempDir(), t.TempDir()
	e := &nodedevices.Engine{DataDirs: []string{claims, nads}}
	if _, err := sync(t, ns, e, vxlanNet("blue", 4500, "10.77.0.2")); err != nil {
		t.Fatal(err)
	}
	release, err := vni.LockFile(nads, 4500).Lock() // a NAD plugin's ADD or DEL
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- ns.Run(func() error {
			_, err := e.Sync(context.Background(), nil) // blue is gone
			return err
		})
	}()
	locks := lockFiles(e, "vxlan-4500")
	locktest.WaitForWaiter(t, locktest.Inode(t, locks[1]), done, "the engine went on while a NAD plugin held the VNI's lock")
	if !ns.HasLink(t, "ncbr4500") || !ns.HasLink(t, "ncvx4500") {
		t.Fatal("the engine removed the devices while a NAD plugin held the VNI's lock")
	}
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if ns.HasLink(t, "ncbr4500") || ns.HasLink(t, "ncvx4500") {
		t.Fatal("the devices of a network that went stay after the plugin's lock was released")
	}
	for _, lock := range locks {
		if _, err := os.Stat(lock); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("lock file %s outlived its devices: %v", lock, err)
		}
	}
}

// TestEngineLocksANetworksOwnDataDir: a network whose config names a
// dataDir of its own (an admin's PodNetwork) has its plugins lock there:
// the engine waits for that lock too before removing its devices, and
// removes its file with them — also when the network went while
// netclass-dra was down (a new engine, reading the state file).
func TestEngineLocksANetworksOwnDataDir(t *testing.T) {
	for _, restart := range []bool{false, true} {
		t.Run(fmt.Sprintf("restart=%v", restart), func(t *testing.T) {
			ns := node(t)
			state := filepath.Join(t.TempDir(), nodedevices.StateFileName)
			e := &nodedevices.Engine{DataDirs: []string{t.TempDir()}, StateFile: state}
			own := t.TempDir()
			n := vxlanNet("blue", 4600, "10.77.0.2")
			n.Config = []byte(strings.Replace(string(n.Config), `"type"`, fmt.Sprintf(`"dataDir":%q,"type"`, own), 1))
			if _, err := sync(t, ns, e, n); err != nil {
				t.Fatal(err)
			}
			if restart {
				e = &nodedevices.Engine{DataDirs: e.DataDirs, StateFile: state}
			}
			waitsForOwnLock(t, ns, e, own, 4600)
			if ns.HasLink(t, "ncbr4600") {
				t.Fatal("the devices stay after the plugin's lock was released")
			}
			if data, err := os.ReadFile(state); err != nil || strings.Contains(string(data), "ncbr4600") {
				t.Errorf("the state file still names the removed bridge: %s, %v", data, err)
			}
		})
	}
}

// waitsForOwnLock holds the lock of VNI id in dataDir (a plugin's ADD)
// while e syncs with no network offered, and checks that e waits for it,
// then removes its file.
func waitsForOwnLock(t *testing.T, ns *nstest.NS, e *nodedevices.Engine, dataDir string, id int) {
	t.Helper()
	lock := filepath.Join(dataDir, "locks", fmt.Sprintf("vxlan-%d.lock", id))
	release, err := vni.LockFile(dataDir, id).Lock()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- ns.Run(func() error {
			_, err := e.Sync(context.Background(), nil)
			return err
		})
	}()
	locktest.WaitForWaiter(t, locktest.Inode(t, lock), done, "the engine went on while the network's plugin held the VNI's lock in its own dataDir")
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(lock); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("lock file %s outlived its devices: %v", lock, err)
	}
}

// TestEngineStateFile: a state file the engine cannot read (another
// version, not JSON) is reported once and replaced at the next change;
// the engine works meanwhile. An entry for a bridge that is neither
// offered nor on the node (gone with a reboot) is dropped.
func TestEngineStateFile(t *testing.T) {
	for name, content := range map[string]string{
		"newer":      `{"version":2,"dataDirs":{"ncbr4700":"/elsewhere"}}`,
		"not JSON":   `{"version":`,
		"stale only": `{"version":1,"dataDirs":{"ncbr4799":"/gone-with-a-reboot"}}`,
	} {
		t.Run(name, func(t *testing.T) {
			ns := node(t)
			state := filepath.Join(t.TempDir(), nodedevices.StateFileName)
			if err := os.WriteFile(state, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			e := &nodedevices.Engine{DataDirs: []string{t.TempDir()}, StateFile: state}
			own := t.TempDir()
			n := vxlanNet("blue", 4700, "10.77.0.2")
			n.Config = []byte(strings.Replace(string(n.Config), `"type"`, fmt.Sprintf(`"dataDir":%q,"type"`, own), 1))
			_, err := sync(t, ns, e, n)
			if stale := name == "stale only"; stale != (err == nil) {
				t.Fatalf("first sync's error: %v", err)
			}
			if !ns.HasLink(t, "ncbr4700") {
				t.Fatal("the engine did not make the network's devices")
			}
			want := fmt.Sprintf(`{"version":1,"dataDirs":{"ncbr4700":%q}}`, own)
			if data, err := os.ReadFile(state); err != nil || string(data) != want {
				t.Fatalf("state file: %s, %v; want %s", data, err, want)
			}
			if _, err := sync(t, ns, e, n); err != nil {
				t.Fatalf("second sync: %v", err)
			}
		})
	}
}

// TestEngineNeverTakesAnotherNetworksDevices: a VNI bridge another network
// tagged is refused with both names and left as it is; a plugin's device of
// the same network is adopted; devices it does not manage are never removed.
func TestEngineNeverTakesAnotherNetworksDevices(t *testing.T) {
	ns := node(t)
	e := &nodedevices.Engine{DataDirs: []string{t.TempDir()}}
	ns.Do(t, func() error {
		_, err := link.EnsureBridge(link.BridgeSpec{Name: "ncbr4200", Owner: "red"})
		return err
	})
	_, err := sync(t, ns, e, vxlanNet("blue", 4200))
	if err == nil || !strings.Contains(err.Error(), `"red"`) || !strings.Contains(err.Error(), `"blue"`) {
		t.Fatalf("joining red's bridge for blue: %v", err)
	}
	if a := ns.Link(t, "ncbr4200").Attrs().Alias; a != link.OwnerAlias("red") {
		t.Fatalf("red's bridge retagged to %q", a)
	}
	// red's own (plugin-made) bridge is adopted when red is offered
	if _, err := sync(t, ns, e, vxlanNet("red", 4200, "10.77.0.9")); err != nil {
		t.Fatal(err)
	}
	if a := ns.Link(t, "ncbr4200").Attrs().Alias; a != link.NodeOwnerAlias("red") {
		t.Fatalf("red's bridge not adopted: alias %q", a)
	}
	// an admin's untagged bridge with a VNI-like name is not the engine's to remove
	ns.Do(t, func() error {
		_, err := link.EnsureBridge(link.BridgeSpec{Name: "ncbr4300"})
		return err
	})
	if _, err := sync(t, ns, e); err != nil {
		t.Fatal(err)
	}
	if !ns.HasLink(t, "ncbr4300") {
		t.Fatal("an untagged bridge was removed")
	}
}

// TestEngineGivesTheTunnelItsTOS: the VNI device the engine makes copies
// the DSCP of what enters the tunnel into the outer header (tos inherit);
// one an older netclass made without it is brought to it in place.
func TestEngineGivesTheTunnelItsTOS(t *testing.T) {
	ns := node(t)
	e := &nodedevices.Engine{DataDirs: []string{t.TempDir()}}
	tos := func() int {
		t.Helper()
		vx, ok := ns.Link(t, "ncvx4400").(*netlink.Vxlan)
		if !ok {
			t.Fatal("ncvx4400 is not a vxlan")
		}
		return vx.TOS
	}
	if _, err := sync(t, ns, e, vxlanNet("blue", 4400, "10.77.0.2")); err != nil {
		t.Fatal(err)
	}
	if got := tos(); got != link.TOSInherit {
		t.Fatalf("tos %d, want inherit (%d)", got, link.TOSInherit)
	}
	before := ns.Link(t, "ncvx4400").Attrs().Index
	if out, err := exec.Command("ip", "-n", ns.Name, "link", "set", "ncvx4400", "type", "vxlan", "tos", "0").CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if _, err := sync(t, ns, e, vxlanNet("blue", 4400, "10.77.0.2")); err != nil {
		t.Fatal(err)
	}
	if got, after := tos(), ns.Link(t, "ncvx4400").Attrs().Index; got != link.TOSInherit || after != before {
		t.Fatalf("after a sync: tos %d, index %d (was %d); want inherit on the same device", got, after, before)
	}
}
