package sysfs_test

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/netclass-dev/netclass/plugins/kernel/sysfs"
	"github.com/netclass-dev/netclass/plugins/kernel/sysfs/sysfstest"
)

func FuzzParsePCIAddress(f *testing.F) {
	for _, s := range []string{"0000:03:00.2", "0000:03:1f.7", "10000:e1:00.0", "0000:03:20.0", "0000:03:00.8", "03:00.2", "", "0000:03:00.2\n", "0000:0g:00.0", "+000:03:00.2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := sysfs.ParsePCIAddress(s)
		if err != nil {
			return
		}
		if got != strings.ToLower(s) || strings.ContainsAny(got, "/\x00 \n") {
			t.Fatalf("ParsePCIAddress(%q) = %q", s, got)
		}
		if again, err := sysfs.ParsePCIAddress(got); err != nil || again != got {
			t.Fatalf("ParsePCIAddress(%q) = %q, %v: not stable", got, again, err)
		}
	})
}

func FuzzParseCount(f *testing.F) {
	for _, s := range []string{"0\n", "8", " 64 \n", "-1", "+1", "65536", "0x10", "", "1e3", "007"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := sysfs.ParseCount(b)
		if err != nil {
			return
		}
		if n < 0 || n > 65535 {
			t.Fatalf("ParseCount(%q) = %d, out of range", b, n)
		}
		if again, err := sysfs.ParseCount([]byte(strconv.Itoa(n))); err != nil || again != n {
			t.Fatalf("ParseCount(%d) = %d, %v", n, again, err)
		}
	})
}

func FuzzParseVirtfn(f *testing.F) {
	for _, s := range []string{"virtfn0", "virtfn12", "virtfn", "virtfn01", "virtfn-1", "virtfn+1", "virtfn99999", "virtfn65536", "physfn", "virtfn1x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, ok := sysfs.ParseVirtfn(s)
		if !ok {
			return
		}
		if s != "virtfn"+strconv.Itoa(n) || n > 65535 {
			t.Fatalf("ParseVirtfn(%q) = %d", s, n)
		}
	})
}

// FuzzTree feeds arbitrary file contents and link targets to the reader:
// it never panics, and what it returns always names valid PCI devices.
func FuzzTree(f *testing.F) {
	f.Add("3", "../0000:03:00.2", "../0000:03:00.0", "../../../bus/pci/drivers/ixgbevf", "vf0")
	f.Add("x", "../../zz", "/", "", "")
	f.Add("1", "0000:03:00.2", "..", ".", "..")
	f.Fuzz(func(t *testing.T, numvfs, virtfn0, physfn, driver, netdev string) {
		tr := sysfstest.New(t)
		tr.AddPF("pf0", pfAddr, 8)
		tr.AddVF(pfAddr, 0, vf0Addr, "")
		tr.Write(filepath.Join(tr.Device(pfAddr), "sriov_numvfs"), numvfs)
		if virtfn0 != "" && !strings.ContainsRune(virtfn0, 0) {
			tr.Symlink(filepath.Join(tr.Device(pfAddr), "virtfn0"), virtfn0)
		}
		if physfn != "" && !strings.ContainsRune(physfn, 0) {
			tr.Symlink(filepath.Join(tr.Device(vf0Addr), "physfn"), physfn)
		}
		if driver != "" && !strings.ContainsRune(driver, 0) {
			tr.Symlink(filepath.Join(tr.Device(vf0Addr), "driver"), driver)
		}
		if netdev != "" && !strings.ContainsAny(netdev, "/\x00") && netdev != "." && netdev != ".." && len(netdev) < 200 {
			tr.SetNetdevs(vf0Addr, netdev)
		}
		fs := sysfs.New(tr.Root)
		if vfs, err := fs.VFs("pf0"); err == nil {
			for _, v := range vfs {
				checkVF(t, v)
			}
		}
		if v, err := fs.VF(vf0Addr); err == nil {
			checkVF(t, v)
		}
	})
}

func checkVF(t *testing.T, v sysfs.VF) {
	t.Helper()
	for _, a := range []string{v.Addr, v.PFAddr} {
		if _, err := sysfs.ParsePCIAddress(a); err != nil {
			t.Fatalf("VF %+v: %v", v, err)
		}
	}
	if v.PF == "" || strings.Contains(v.Driver, "/") {
		t.Fatalf("VF %+v: bad PF or driver", v)
	}
}
