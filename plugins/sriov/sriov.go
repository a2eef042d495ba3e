// Package sriov is netclass-sriov: one SR-IOV VF per attachment, chosen by
// its PCI address (deviceID, or runtimeConfig.deviceID from a device plugin)
// or taken free from a PF (master). The VF is configured through its PF
// (mac, vlan, qos, proto, spoofchk, trust, link state, rates) and its netdev
// is moved into the pod under the CNI interface name, with IPAM's addresses
// and the qos block (ingress through an IFB, egress by tbf or by the VF's
// own rate limiter). A VF bound to vfio-pci is a userspace attachment: no
// netdev, the PCI address in the result. DEL puts everything back: the
// netdev returns to the host with its name, MTU, MAC and state, and the VF
// gets its original settings, saved in the attachment's record by ADD.
package sriov

import (
	"context"
	"fmt"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/netclass-dev/netclass/conf/netconf"
	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/plugins/kernel/link"
	"github.com/netclass-dev/netclass/plugins/kernel/sysfs"
)

// EnvSysfsRoot names the environment variable that moves sysfs's root
// (default /sys), so the binary can be tested against a fake tree.
const EnvSysfsRoot = "NETCLASS_SYSFS_ROOT"

// sysfsReader is what the plugin reads from sysfs (plugins/kernel/sysfs).
type sysfsReader interface {
	VFs(pf string) ([]sysfs.VF, error)
	VF(addr string) (sysfs.VF, error)
}

// vfControl reads and sets a VF's settings through its PF (rtnetlink).
// Tests fake it where the kernel has no SR-IOV PF.
type vfControl interface {
	VF(pf string, index int) (vfState, error)
	SetVF(pf string, index int, s vfState) error
}

// plugin holds the two things the kernel is asked through, so tests can
// replace them.
type plugin struct {
	sys sysfsReader
	vfs vfControl
}

// Funcs are the plugin's CNI verbs, for skel, reading sysfs at sysfsRoot
// ("" is /sys) and configuring VFs with netlink.
func Funcs(sysfsRoot string) skel.CNIFuncs {
	return plugin{sys: sysfs.New(sysfsRoot), vfs: netlinkVFs{}}.funcs()
}

func (p plugin) funcs() skel.CNIFuncs {
	return skel.CNIFuncs{Add: p.cmdAdd, Del: p.cmdDel, Check: p.cmdCheck, GC: p.cmdGC, Status: p.cmdStatus}
}

func store(c *netconf.SRIOV) attach.Store { return attach.Store{Dir: c.DataDir} }

func ipamOf(c *netconf.SRIOV) attach.IPAM { return attach.IPAM{Type: c.IPAM.Type, Conf: c.Raw} }

// cmdStatus fails with code 50 when the PF or the configured VF is missing,
// or IPAM cannot serve.
func (p plugin) cmdStatus(args *skel.CmdArgs) error {
	c, err := netconf.ParseSRIOV(args.StdinData)
	if err != nil {
		return err
	}
	if err := p.available(c); err != nil {
		return attach.Unavailable(err)
	}
	if err := ipamOf(c).Status(context.Background()); err != nil {
		return attach.Unavailable(err)
	}
	return nil
}

func (p plugin) available(c *netconf.SRIOV) error {
	pf := c.Master
	if c.DeviceID != "" {
		vf, err := p.sys.VF(c.DeviceID)
		if err != nil {
			return deviceError(c.DeviceID, err)
		}
		pf = vf.PF
	} else if _, err := p.sys.VFs(pf); err != nil {
		return masterError(pf, err)
	}
	if _, err := link.ByName(pf); err != nil {
		return fmt.Errorf("PF %q: %w", pf, err)
	}
	return nil
}
