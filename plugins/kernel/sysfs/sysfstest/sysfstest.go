// Package sysfstest builds fake sysfs trees for tests: PFs and VFs laid out
// the way the kernel lays them out (devices under devices/pci0000:00, linked
// from bus/pci/devices and class/net, virtfnN, physfn, driver and net/),
// under a temporary directory that plugins reach through NETCLASS_SYSFS_ROOT.
package sysfstest

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Tree is a fake sysfs tree.
type Tree struct {
	Root string
	t    testing.TB
}

// New creates an empty tree in a directory removed when the test ends.
func New(t testing.TB) *Tree {
	t.Helper()
	tr := &Tree{Root: t.TempDir(), t: t}
	for _, d := range []string{"devices/pci0000:00", "bus/pci/devices", "bus/pci/drivers", "class/net"} {
		tr.mkdir(filepath.Join(tr.Root, d))
	}
	return tr
}

// Device is the real directory of the PCI device at addr.
func (tr *Tree) Device(addr string) string {
	return filepath.Join(tr.Root, "devices", "pci0000:00", addr)
}

// AddPF adds a PF at addr with its netdev name and sriov_totalvfs, and no VFs.
func (tr *Tree) AddPF(name, addr string, totalVFs int) {
	tr.t.Helper()
	tr.addDevice(addr, "")
	tr.write(filepath.Join(tr.Device(addr), "sriov_totalvfs"), strconv.Itoa(totalVFs))
	tr.write(filepath.Join(tr.Device(addr), "sriov_numvfs"), "0")
	tr.SetNetdevs(addr, name)
}

// AddVF adds VF index of the PF at pfAddr, at addr, bound to driver ("" for
// none), with the given netdevs, and raises the PF's sriov_numvfs to cover it.
func (tr *Tree) AddVF(pfAddr string, index int, addr, driver string, netdevs ...string) {
	tr.t.Helper()
	tr.addDevice(addr, driver)
	tr.Symlink(filepath.Join(tr.Device(pfAddr), "virtfn"+strconv.Itoa(index)), "../"+addr)
	tr.Symlink(filepath.Join(tr.Device(addr), "physfn"), "../"+pfAddr)
	numvfs := filepath.Join(tr.Device(pfAddr), "sriov_numvfs")
	if n, _ := strconv.Atoi(tr.read(numvfs)); n < index+1 {
		tr.write(numvfs, strconv.Itoa(index+1))
	}
	tr.SetNetdevs(addr, netdevs...)
}

// SetNetdevs replaces the device's netdevs (net/<name>, class/net/<name>).
func (tr *Tree) SetNetdevs(addr string, names ...string) {
	tr.t.Helper()
	net := filepath.Join(tr.Device(addr), "net")
	old, _ := os.ReadDir(net)
	for _, e := range old {
		tr.remove(filepath.Join(tr.Root, "class", "net", e.Name()))
	}
	tr.remove(net)
	tr.mkdir(net)
	for _, n := range names {
		tr.mkdir(filepath.Join(net, n))
		tr.Symlink(filepath.Join(net, n, "device"), "../../../"+addr)
		tr.Symlink(filepath.Join(tr.Root, "class", "net", n), "../../devices/pci0000:00/"+addr+"/net/"+n)
	}
}

// SetDriver binds the device to driver ("" unbinds it).
func (tr *Tree) SetDriver(addr, driver string) {
	tr.t.Helper()
	link := filepath.Join(tr.Device(addr), "driver")
	tr.remove(link)
	if driver != "" {
		tr.mkdir(filepath.Join(tr.Root, "bus", "pci", "drivers", driver))
		tr.Symlink(link, "../../../bus/pci/drivers/"+driver)
	}
}

func (tr *Tree) addDevice(addr, driver string) {
	tr.t.Helper()
	tr.mkdir(tr.Device(addr))
	tr.Symlink(filepath.Join(tr.Root, "bus", "pci", "devices", addr), "../../../devices/pci0000:00/"+addr)
	tr.SetDriver(addr, driver)
}

// Symlink creates (or replaces) a symlink, for tests that tamper with the tree.
func (tr *Tree) Symlink(path, target string) {
	tr.t.Helper()
	tr.remove(path)
	if err := os.Symlink(target, path); err != nil {
		tr.t.Fatal(err)
	}
}

// Write replaces a file's content, for tests that tamper with the tree.
func (tr *Tree) Write(path, content string) { tr.t.Helper(); tr.write(path, content) }

// Mkdir creates a directory (and its parents), for tests that tamper with the tree.
func (tr *Tree) Mkdir(path string) { tr.t.Helper(); tr.mkdir(path) }

// Remove deletes a file, link or directory tree, for tests that tamper with the tree.
func (tr *Tree) Remove(path string) { tr.t.Helper(); tr.remove(path) }

func (tr *Tree) write(path, content string) {
	tr.t.Helper()
	if err := os.WriteFile(path, []byte(content+"\n"), 0o644); err != nil {
		tr.t.Fatal(err)
	}
}

func (tr *Tree) read(path string) string {
	tr.t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tr.t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func (tr *Tree) mkdir(path string) {
	tr.t.Helper()
	if err := os.MkdirAll(path, 0o755); err != nil {
		tr.t.Fatal(err)
	}
}

func (tr *Tree) remove(path string) {
	tr.t.Helper()
	if err := os.RemoveAll(path); err != nil {
		tr.t.Fatal(err)
	}
}
