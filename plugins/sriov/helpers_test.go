package sriov

import (
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"

	"github.com/netclass-dev/netclass/plugins/kernel/sysfs/sysfstest"
	"github.com/netclass-dev/netclass/test/cnitest"
	"github.com/netclass-dev/netclass/test/nstest"
)

const (
	pluginName = "netclass-sriov"
	pfAddr     = "0000:03:00.0"
)

// vfAddr is the PCI address of VF i of the test PF.
func vfAddr(i int) string { return fmt.Sprintf("0000:03:%02x.%d", 0x10+i/8, i%8) }

// vfMAC is the MAC a stand-in VF netdev starts with.
func vfMAC(i int) string { return fmt.Sprintf("02:aa:00:00:00:%02x", i) }

// rig is a host namespace with an SR-IOV PF whose VFs are stood in by
// veths: VF i's netdev is "vf<i>" on the host, its other end "wire<i>" in
// the wire namespace (the network behind the VF), all listed in a fake
// sysfs tree the plugin reads through NETCLASS_SYSFS_ROOT.
type rig struct {
	h    *cnitest.Host
	tree *sysfstest.Tree
	wire *nstest.NS
	pf   string
	fake *fakeVFs // nil: the real binary (no PF-side VF settings on this kernel)
}

// newRig makes a PF named pf with n VFs. The PF itself is a veth too, so
// that it exists as a link (STATUS asks for it); fake, when given, makes the
// plugin keep VF settings in it.
func newRig(t *testing.T, pf string, n int, fake *fakeVFs) *rig {
	t.Helper()
	r := emptyRig(t, fake)
	nstest.Veth(t, r.h.NS, pf, "", r.wire, "wire-"+pf, "")
	r.addPF(t, pf, n)
	return r
}

// emptyRig is the host and wire namespaces and the plugin, without a PF.
func emptyRig(t *testing.T, fake *fakeVFs) *rig {
	t.Helper()
	r := &rig{tree: sysfstest.New(t), wire: nstest.New(t), fake: fake}
	r.h = &cnitest.Host{NS: nstest.New(t)}
	r.h.Dir = pluginDir(t, r.tree.Root, fake)
	return r
}

// addPF lists the host's link pf as the PF, with n stand-in VFs.
func (r *rig) addPF(t *testing.T, pf string, n int) {
	t.Helper()
	r.pf = pf
	r.tree.AddPF(pf, pfAddr, 64)
	for i := range n {
		r.addVF(t, i, "iavf")
	}
}

// addVF adds VF i with a stand-in netdev vf<i> (MTU 1400, MAC vfMAC(i), up).
func (r *rig) addVF(t *testing.T, i int, driver string) {
	t.Helper()
	name := fmt.Sprintf("vf%d", i)
	nstest.Veth(t, r.h.NS, name, "", r.wire, fmt.Sprintf("wire%d", i), "")
	mac, _ := net.ParseMAC(vfMAC(i))
	h := r.h.NS.Handle(t)
	l := r.h.NS.Link(t, name)
	if err := h.LinkSetMTU(l, 1400); err != nil {
		t.Fatal(err)
	}
	if err := h.LinkSetHardwareAddr(l, mac); err != nil {
		t.Fatal(err)
	}
	r.tree.AddVF(pfAddr, i, vfAddr(i), driver, name)
}

// addUserspaceVF adds VF i bound to vfio-pci: no netdev.
func (r *rig) addUserspaceVF(i int) { r.tree.AddVF(pfAddr, i, vfAddr(i), "vfio-pci") }

// pluginDir is a plugin directory for the test: the plugin binaries and
// IPAM plugins, with netclass-sriov wrapped to see the fake sysfs tree (and,
// with fake, to be this test binary keeping VF settings in fake's file).
func pluginDir(t *testing.T, sysfsRoot string, fake *fakeVFs) string {
	t.Helper()
	src := cnitest.Plugins(t)
	dir := t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != pluginName {
			if err := os.Symlink(filepath.Join(src, e.Name()), filepath.Join(dir, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
	script := fmt.Sprintf("#!/bin/sh\nexport %s=%s\n", EnvSysfsRoot, quote(sysfsRoot))
	if fake != nil {
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		script += fmt.Sprintf("export %s=%s\nexec %s \"$@\"\n", envFakeVFs, quote(fake.path), quote(self))
	} else {
		script += fmt.Sprintf("exec %s \"$@\"\n", quote(binary(t, src)))
	}
	if err := os.WriteFile(filepath.Join(dir, pluginName), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// buildOnce builds cmd/netclass-sriov for plugin directories that lack it
// (a Makefile's test directory made before the plugin was listed there).
var buildOnce = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "netclass-sriov-test-")
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, pluginName)
	cmd := exec.Command("go", "build", "-o", out, "github.com/netclass-dev/netclass/cmd/netclass-sriov")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %w\n%s", err, b)
	}
	return out, nil
})

// binary is the netclass-sriov binary: the one in dir, or a fresh build.
func binary(t *testing.T, dir string) string {
	t.Helper()
	if p := filepath.Join(dir, pluginName); isFile(p) {
		return p
	}
	p, err := buildOnce()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// network is a netclass-sriov configuration of a test.
type network map[string]any

// newNetwork is a network on pf (master selection) with host-local IPAM on
// subnet; extra keys are merged over it.
func newNetwork(t *testing.T, r *rig, subnet string, extra map[string]any) network {
	t.Helper()
	n := network{
		"cniVersion": "1.1.0", "name": "sriov-net", "type": pluginName, "master": r.pf,
		"dataDir": t.TempDir(),
		"ipam": map[string]any{"type": "host-local", "dataDir": t.TempDir(),
			"ranges": []any{[]any{map[string]any{"subnet": subnet}}}},
	}
	for k, v := range extra {
		n[k] = v
	}
	return n
}

func (n network) bytes(t testing.TB) []byte {
	t.Helper()
	b, err := json.Marshal(n)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// cniErr asserts err is a CNI error with the code, whose message contains want.
func cniErr(t *testing.T, err error, code uint, want string) {
	t.Helper()
	e, ok := err.(*types.Error)
	if !ok {
		t.Fatalf("error %v (%T) is not a CNI error", err, err)
	}
	if e.Code != code || !strings.Contains(e.Msg, want) {
		t.Fatalf("CNI error %d %q (details %q), want code %d containing %q", e.Code, e.Msg, e.Details, code, want)
	}
}

// podIf returns the result's only interface.
func resultIf(t *testing.T, res *current.Result) *current.Interface {
	t.Helper()
	if len(res.Interfaces) != 1 {
		t.Fatalf("result interfaces %v, want one", res.Interfaces)
	}
	return res.Interfaces[0]
}

// firstIP is the result's first address.
func firstIP(t *testing.T, res *current.Result) netip.Addr {
	t.Helper()
	if len(res.IPs) == 0 {
		t.Fatalf("result has no address")
	}
	a, _ := netip.AddrFromSlice(res.IPs[0].Address.IP)
	return a.Unmap()
}

// hostVF asserts VF i's stand-in netdev is on the host with its original
// name, MTU, MAC, alias and up, with no qdisc of ours.
func (r *rig) hostVF(t *testing.T, i int) {
	t.Helper()
	name := fmt.Sprintf("vf%d", i)
	if !r.h.NS.HasLink(t, name) {
		t.Fatalf("%s is not back on the host", name)
	}
	a := r.h.NS.Link(t, name).Attrs()
	if a.MTU != 1400 || a.HardwareAddr.String() != vfMAC(i) || a.Flags&net.FlagUp == 0 || a.Alias != "" {
		t.Errorf("%s is back with MTU %d, MAC %s, flags %v, alias %q; want MTU 1400, MAC %s, up, no alias", name, a.MTU, a.HardwareAddr, a.Flags, a.Alias, vfMAC(i))
	}
	qs, err := r.h.NS.Handle(t).QdiscList(r.h.NS.Link(t, name))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range qs {
		if q.Type() == "tbf" || q.Type() == "ingress" {
			t.Errorf("%s came back with a %s qdisc", name, q.Type())
		}
	}
}

// records lists the network's attachment records.
func records(t *testing.T, n network) []string {
	t.Helper()
	entries, _ := os.ReadDir(filepath.Join(n["dataDir"].(string), n["name"].(string)))
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// allocated reports whether host-local still holds ip.
func allocated(n network, ip netip.Addr) bool {
	ipam := n["ipam"].(map[string]any)
	_, err := os.Stat(filepath.Join(ipam["dataDir"].(string), n["name"].(string), ip.String()))
	return err == nil
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

func podLink(t *testing.T, p *cnitest.Pod, name string) netlink.Link { return p.NS.Link(t, name) }

// mortalPod is a pod whose namespace the test may delete itself.
func mortalPod(t *testing.T) *cnitest.Pod {
	t.Helper()
	p := cnitest.NewPod(t) // for its unique ID; its own namespace stays unused
	ns, err := nstest.Create(nstest.Prefix + "mortal-" + p.ID[4:14])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := os.Stat(ns.Path); err == nil {
			ns.Delete()
		}
	})
	return &cnitest.Pod{ID: p.ID, NS: ns}
}
