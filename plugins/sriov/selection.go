package sriov

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/netclass-dev/netclass/conf/netconf"
	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/plugins/kernel/link"
	"github.com/netclass-dev/netclass/plugins/kernel/sysfs"
)

// candidates returns the VFs the attachment may take and the PF they share:
// the deviceID's VF alone, or every VF of master.
func (p plugin) candidates(c *netconf.SRIOV) (string, []sysfs.VF, error) {
	if c.DeviceID == "" {
		vfs, err := p.sys.VFs(c.Master)
		if err != nil {
			return "", nil, masterError(c.Master, err)
		}
		return c.Master, vfs, nil
	}
	vf, err := p.sys.VF(c.DeviceID)
	if err != nil {
		return "", nil, deviceError(c.DeviceID, err)
	}
	if c.Master != "" && vf.PF != c.Master {
		return "", nil, attach.Invalid("deviceID: %s is a VF of %q, not of master %q", vf.Addr, vf.PF, c.Master)
	}
	return vf.PF, []sysfs.VF{vf}, nil
}

// deviceError is a deviceID that names no usable VF, as CNI error 7.
func deviceError(id string, err error) error {
	switch {
	case errors.Is(err, sysfs.ErrNoDevice):
		return attach.Invalid("deviceID: no PCI device %s", id)
	case errors.Is(err, sysfs.ErrNotVF):
		return attach.Invalid("deviceID: %s is not a VF of any PF", id)
	}
	return attach.Invalid("deviceID: %v", err)
}

// masterError is a master that is no PF with VFs, as CNI error 7.
func masterError(pf string, err error) error {
	switch {
	case errors.Is(err, sysfs.ErrNoNetdev):
		return attach.Invalid("master: no network device %q", pf)
	case errors.Is(err, sysfs.ErrNotPF):
		return attach.Invalid("master: %q is not an SR-IOV PF (%v)", pf, err)
	case errors.Is(err, sysfs.ErrNoVFs):
		return attach.Invalid("master: PF %q has no VFs enabled (sriov_numvfs)", pf)
	}
	return attach.Invalid("master: %v", err)
}

// held returns the VFs recorded as attached, by PCI address, with the
// attachment that holds each: every sriov record under dataDir, whatever
// its network.
func held(dataDir string) (map[string]string, error) {
	entries, err := os.ReadDir(dataDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list networks in %s: %w", dataDir, err)
	}
	out := map[string]string{}
	s := attach.Store{Dir: dataDir}
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		recs, err := s.List(e.Name())
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			if r.Plugin != netconf.TypeSRIOV {
				continue
			}
			st, err := stateOf(r)
			if err != nil {
				return nil, err
			}
			out[st.PCI] = fmt.Sprintf("%s/%s of network %q", r.ContainerID, r.IfName, r.Network)
		}
	}
	return out, nil
}

// hostNetdev returns the VF's netdev in the host namespace, or "".
func hostNetdev(vf sysfs.VF) string {
	for _, n := range vf.Netdevs {
		if _, err := link.ByName(n); err == nil {
			return n
		}
	}
	return ""
}

// pick chooses the VF: the deviceID's one if it is free, or master's free
// VF of the lowest index. Free means not recorded as attached and, for a
// kernel VF, with its netdev in the host namespace.
func pick(c *netconf.SRIOV, vfs []sysfs.VF, inUse map[string]string) (sysfs.VF, string, error) {
	var busy, userspace, away int
	for _, vf := range vfs {
		if by, ok := inUse[vf.Addr]; ok {
			if c.DeviceID != "" {
				return vf, "", attach.Invalid("deviceID: VF %s is in use by %s", vf.Addr, by)
			}
			busy++
			continue
		}
		if vf.Userspace() {
			if c.DeviceID != "" {
				return vf, "", nil
			}
			userspace++
			continue
		}
		if n := hostNetdev(vf); n != "" {
			return vf, n, nil
		}
		if c.DeviceID != "" {
			return vf, "", attach.Invalid("deviceID: VF %s has no netdev in the host namespace (driver %q, netdevs %v): it is in another namespace or its driver has none", vf.Addr, vf.Driver, vf.Netdevs)
		}
		away++
	}
	return sysfs.VF{}, "", types.NewError(types.ErrTryAgainLater, fmt.Sprintf(
		"master: no free VF on %q: %d VFs, %d attached, %d bound to vfio-pci (deviceID only), %d without a netdev in the host namespace",
		c.Master, len(vfs), busy, userspace, away), "")
}
