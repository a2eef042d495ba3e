package main

import (
	"github.com/netclass-dev/netclass/plugins/kernel/sysfs"
	"github.com/netclass-dev/netclass/shim/publish"
)

// sysfsVFs lists a PF's VFs through plugins/kernel/sysfs, the one package
// that reads SR-IOV state from sysfs (api/contract/README.md); its root moves with
// NETCLASS_SYSFS_ROOT like the plugins'. The shim itself never links the
// plugins: their logic runs only as executed binaries. VFs handed to
// userspace (vfio-pci) are not offered: netclass-sriov attaches netdevs.
type sysfsVFs struct{ fs sysfs.FS }

func (s sysfsVFs) VFs(pf string) ([]publish.VF, error) {
	vfs, err := s.fs.VFs(pf)
	if err != nil {
		return nil, err
	}
	out := make([]publish.VF, 0, len(vfs))
	for _, vf := range vfs {
		if !vf.Userspace() {
			out = append(out, publish.VF{Addr: vf.Addr, Index: vf.Index})
		}
	}
	return out, nil
}
