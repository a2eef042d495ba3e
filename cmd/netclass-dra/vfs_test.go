package main

import (
	"testing"

	"github.com/netclass-dev/netclass/plugins/kernel/sysfs"
	"github.com/netclass-dev/netclass/plugins/kernel/sysfs/sysfstest"
	"github.com/netclass-dev/netclass/shim/publish"
)

func TestSysfsVFs(t *testing.T) {
	tr := sysfstest.New(t)
	tr.AddPF("pf0", "0000:03:00.0", 4)
	tr.AddVF("0000:03:00.0", 0, "0000:03:00.2", "ixgbevf", "vf0")
	tr.AddVF("0000:03:00.0", 1, "0000:03:00.3", sysfs.UserspaceDriver)
	tr.AddVF("0000:03:00.0", 2, "0000:03:00.4", "")
	got, err := sysfsVFs{sysfs.New(tr.Root)}.VFs("pf0")
	if err != nil {
		t.Fatal(err)
	}
	want := []publish.VF{{Addr: "0000:03:00.2", Index: 0}, {Addr: "0000:03:00.4", Index: 2}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("VFs = %+v, want %+v (the vfio-pci one left out)", got, want)
	}
	if _, err := (sysfsVFs{sysfs.New(tr.Root)}).VFs("nope"); err == nil {
		t.Fatal("a missing PF listed VFs")
	}
}
