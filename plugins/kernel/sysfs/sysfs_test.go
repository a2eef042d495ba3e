package sysfs_test

import (
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/netclass-dev/netclass/plugins/kernel/sysfs"
	"github.com/netclass-dev/netclass/plugins/kernel/sysfs/sysfstest"
)

const (
	pfAddr   = "0000:03:00.0"
	vf0Addr  = "0000:03:00.2"
	vf1Addr  = "0000:03:00.3"
	vf2Addr  = "0000:03:00.4"
	bareAddr = "0000:04:00.0" // a PF with SR-IOV but no VFs enabled
	nicAddr  = "0000:05:00.0" // a PCI NIC without SR-IOV
)

// tree is the fake machine of these tests: PF pf0 with three VFs (a kernel
// VF with a netdev, a vfio-pci VF, a kernel VF whose netdev is elsewhere),
// pf1 without VFs, eth9 without SR-IOV and veth0 that is no PCI device.
func tree(t *testing.T) *sysfstest.Tree {
	tr := sysfstest.New(t)
	tr.AddPF("pf0", pfAddr, 8)
	tr.AddVF(pfAddr, 0, vf0Addr, "ixgbevf", "vf0")
	tr.AddVF(pfAddr, 1, vf1Addr, "vfio-pci")
	tr.AddVF(pfAddr, 2, vf2Addr, "ixgbevf")
	tr.AddPF("pf1", bareAddr, 4)
	tr.AddPF("eth9", nicAddr, 0)
	tr.Remove(filepath.Join(tr.Device(nicAddr), "sriov_totalvfs"))
	tr.Remove(filepath.Join(tr.Device(nicAddr), "sriov_numvfs"))
	tr.Mkdir(filepath.Join(tr.Root, "devices", "virtual", "net", "veth0"))
	tr.Symlink(filepath.Join(tr.Root, "class", "net", "veth0"), "../../devices/virtual/net/veth0")
	return tr
}

func TestDiscovery(t *testing.T) {
	f := sysfs.New(tree(t).Root)
	pf, err := f.PF("pf0")
	if err != nil {
		t.Fatal(err)
	}
	if want := (sysfs.PF{Name: "pf0", Addr: pfAddr, NumVFs: 3, TotalVFs: 8}); pf != want {
		t.Errorf("PF(pf0) = %+v, want %+v", pf, want)
	}
	vfs, err := f.VFs("pf0")
	if err != nil {
		t.Fatal(err)
	}
	want := []sysfs.VF{
		{Addr: vf0Addr, Index: 0, PF: "pf0", PFAddr: pfAddr, Netdevs: []string{"vf0"}, Driver: "ixgbevf"},
		{Addr: vf1Addr, Index: 1, PF: "pf0", PFAddr: pfAddr, Driver: "vfio-pci"},
		{Addr: vf2Addr, Index: 2, PF: "pf0", PFAddr: pfAddr, Driver: "ixgbevf"},
	}
	if !reflect.DeepEqual(vfs, want) {
		t.Errorf("VFs(pf0) =\n%+v\nwant\n%+v", vfs, want)
	}
	for i, w := range want {
		got, err := f.VF(strings.ToUpper(w.Addr))
		if err != nil {
			t.Fatalf("VF(%s): %v", w.Addr, err)
		}
		if !reflect.DeepEqual(got, w) {
			t.Errorf("VF(%s) = %+v, want %+v", w.Addr, got, w)
		}
		if got.Userspace() != (i == 1) {
			t.Errorf("VF(%s).Userspace() = %v", w.Addr, got.Userspace())
		}
	}
}

func TestManyVFsAreOrderedByIndex(t *testing.T) {
	tr := sysfstest.New(t)
	tr.AddPF("pf0", pfAddr, 16)
	addrs := map[int]string{10: "0000:03:01.4", 2: "0000:03:00.4", 1: "0000:03:00.3", 0: "0000:03:00.2"}
	for _, i := range []int{10, 2, 0, 1} {
		tr.AddVF(pfAddr, i, addrs[i], "iavf")
	}
	vfs, err := sysfs.New(tr.Root).VFs("pf0")
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	for _, v := range vfs {
		got = append(got, v.Index)
		if v.Addr != addrs[v.Index] {
			t.Errorf("VF %d at %s, want %s", v.Index, v.Addr, addrs[v.Index])
		}
	}
	if !reflect.DeepEqual(got, []int{0, 1, 2, 10}) {
		t.Errorf("indexes %v, want [0 1 2 10]", got)
	}
	vf, err := sysfs.New(tr.Root).VF(addrs[10])
	if err != nil || vf.Index != 10 {
		t.Errorf("VF(%s) = %+v, %v; want index 10", addrs[10], vf, err)
	}
}

func TestDefaultRoot(t *testing.T) {
	if got := sysfs.New("").Root(); got != "/sys" {
		t.Errorf(`New("").Root() = %q, want /sys`, got)
	}
}

func TestErrors(t *testing.T) {
	dev := func(tr *sysfstest.Tree, addr, name string) string { return filepath.Join(tr.Device(addr), name) }
	tests := []struct {
		name   string
		tamper func(tr *sysfstest.Tree)
		call   func(f sysfs.FS) error
		is     error  // sentinel the error wraps, or nil
		want   string // substring of the message
	}{
		{"PF: no such netdev", nil, pf("nope"), sysfs.ErrNoNetdev, `"nope"`},
		{"PF: name is a path", nil, pf("../pf0"), sysfs.ErrNoNetdev, `"../pf0"`},
		{"PF: empty name", nil, pf(""), sysfs.ErrNoNetdev, `""`},
		{"PF: virtual netdev", nil, pf("veth0"), sysfs.ErrNotPF, "not a PCI device"},
		{"PF: PCI NIC without SR-IOV", nil, pf("eth9"), sysfs.ErrNotPF, nicAddr},
		{"PF: sriov_numvfs missing", func(tr *sysfstest.Tree) { tr.Remove(dev(tr, pfAddr, "sriov_numvfs")) }, pf("pf0"), sysfs.ErrNotPF, "sriov_numvfs"},
		{"PF: garbage sriov_totalvfs", func(tr *sysfstest.Tree) { tr.Write(dev(tr, pfAddr, "sriov_totalvfs"), "eight") }, pf("pf0"), nil, `"eight" is not a count`},
		{"PF: negative sriov_numvfs", func(tr *sysfstest.Tree) { tr.Write(dev(tr, pfAddr, "sriov_numvfs"), "-1") }, pf("pf0"), nil, `"-1" is not a count`},
		{"PF: huge sriov_numvfs", func(tr *sysfstest.Tree) { tr.Write(dev(tr, pfAddr, "sriov_numvfs"), "99999999999999999999") }, pf("pf0"), nil, "not a count"},
		{"PF: sriov_numvfs is a directory", func(tr *sysfstest.Tree) {
			tr.Remove(dev(tr, pfAddr, "sriov_numvfs"))
			tr.Mkdir(dev(tr, pfAddr, "sriov_numvfs"))
		}, pf("pf0"), nil, "is a directory"},
		{"PF: dangling device link", func(tr *sysfstest.Tree) {
			tr.Symlink(filepath.Join(tr.Device(pfAddr), "net", "pf0", "device"), "../../../0000:09:00.0")
		}, pf("pf0"), sysfs.ErrNoDevice, "0000:09:00.0"},
		{"PF: device link to garbage", func(tr *sysfstest.Tree) {
			tr.Symlink(filepath.Join(tr.Device(pfAddr), "net", "pf0", "device"), "../../../not-a-device")
		}, pf("pf0"), nil, `"not-a-device" is not a PCI address`},
		{"PF: device link names nothing", func(tr *sysfstest.Tree) {
			tr.Symlink(filepath.Join(tr.Device(pfAddr), "net", "pf0", "device"), "/")
		}, pf("pf0"), nil, "names nothing"},
		{"VFs: PF without VFs", nil, vfs("pf1"), sysfs.ErrNoVFs, bareAddr},
		{"VFs: not a PF", nil, vfs("eth9"), sysfs.ErrNotPF, "eth9"},
		{"VFs: no such netdev", nil, vfs("nope"), sysfs.ErrNoNetdev, "nope"},
		{"VFs: dangling virtfn", func(tr *sysfstest.Tree) { tr.Symlink(dev(tr, pfAddr, "virtfn1"), "../0000:03:0f.7") }, vfs("pf0"), sysfs.ErrNoDevice, "virtfn1 links to 0000:03:0f.7"},
		{"VFs: virtfn to garbage", func(tr *sysfstest.Tree) { tr.Symlink(dev(tr, pfAddr, "virtfn2"), "../zz") }, vfs("pf0"), nil, `virtfn2: link target: "zz" is not a PCI address`},
		{"VFs: virtfn is not a link", func(tr *sysfstest.Tree) {
			tr.Remove(dev(tr, pfAddr, "virtfn0"))
			tr.Write(dev(tr, pfAddr, "virtfn0"), "0000:03:00.2")
		}, vfs("pf0"), nil, "virtfn0"},
		{"VFs: driver link names nothing", func(tr *sysfstest.Tree) { tr.Symlink(dev(tr, vf0Addr, "driver"), "/") }, vfs("pf0"), nil, "VF " + vf0Addr + " driver"},
		{"VFs: driver is not a link", func(tr *sysfstest.Tree) {
			tr.Remove(dev(tr, vf0Addr, "driver"))
			tr.Write(dev(tr, vf0Addr, "driver"), "ixgbevf")
		}, vfs("pf0"), nil, "VF " + vf0Addr + " driver"},
		{"VFs: net is a file", func(tr *sysfstest.Tree) {
			tr.Remove(dev(tr, vf0Addr, "net"))
			tr.Write(dev(tr, vf0Addr, "net"), "vf0")
		}, vfs("pf0"), nil, "VF " + vf0Addr + ": read netdevs"},
		{"VF: not a PCI address", nil, vf("03:00.2"), nil, `"03:00.2" is not a PCI address`},
		{"VF: function out of range", nil, vf("0000:03:00.8"), nil, "not a PCI address"},
		{"VF: no such device", nil, vf("0000:03:00.7"), sysfs.ErrNoDevice, "0000:03:00.7"},
		{"VF: dangling bus entry", func(tr *sysfstest.Tree) { tr.Remove(tr.Device(vf2Addr)) }, vf(vf2Addr), sysfs.ErrNoDevice, vf2Addr},
		{"VF: a PF is no VF", nil, vf(pfAddr), sysfs.ErrNotVF, pfAddr},
		{"VF: dangling physfn", func(tr *sysfstest.Tree) { tr.Symlink(dev(tr, vf0Addr, "physfn"), "../0000:0a:00.0") }, vf(vf0Addr), sysfs.ErrNoDevice, "physfn links to 0000:0a:00.0"},
		{"VF: physfn to garbage", func(tr *sysfstest.Tree) { tr.Symlink(dev(tr, vf0Addr, "physfn"), "../pf") }, vf(vf0Addr), nil, `"pf" is not a PCI address`},
		{"VF: PF without netdev", func(tr *sysfstest.Tree) { tr.SetNetdevs(pfAddr) }, vf(vf0Addr), sysfs.ErrNoNetdev, "PF " + pfAddr + " of " + vf0Addr + " has no netdev"},
		{"VF: PF does not list it", func(tr *sysfstest.Tree) { tr.Remove(dev(tr, pfAddr, "virtfn0")) }, vf(vf0Addr), sysfs.ErrNotVF, "no virtfn of that PF is " + vf0Addr},
		{"VF: physfn names a PF of other VFs", func(tr *sysfstest.Tree) { tr.Symlink(dev(tr, vf0Addr, "physfn"), "../"+bareAddr) }, vf(vf0Addr), sysfs.ErrNotVF, bareAddr},
		{"VF: PF's net is a file", func(tr *sysfstest.Tree) {
			tr.Remove(dev(tr, pfAddr, "net"))
			tr.Write(dev(tr, pfAddr, "net"), "pf0")
		}, vf(vf0Addr), nil, "PF " + pfAddr + " of " + vf0Addr},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := tree(t)
			if tc.tamper != nil {
				tc.tamper(tr)
			}
			err := tc.call(sysfs.New(tr.Root))
			if err == nil {
				t.Fatal("no error")
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %q does not wrap %q", err, tc.is)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

func pf(name string) func(sysfs.FS) error {
	return func(f sysfs.FS) error { _, err := f.PF(name); return err }
}

func vfs(name string) func(sysfs.FS) error {
	return func(f sysfs.FS) error { _, err := f.VFs(name); return err }
}

func vf(addr string) func(sysfs.FS) error {
	return func(f sysfs.FS) error { _, err := f.VF(addr); return err }
}
