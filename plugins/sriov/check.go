package sriov

import (
	"context"
	"fmt"
	"strings"

	"github.com/containernetworking/cni/pkg/skel"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ip"

	"github.com/netclass-dev/netclass/conf/netconf"
	"github.com/netclass-dev/netclass/conf/qos"
	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/plugins/kernel/link"
	"github.com/netclass-dev/netclass/plugins/kernel/netns"
	"github.com/netclass-dev/netclass/plugins/kernel/tc"
	"github.com/netclass-dev/netclass/plugins/portguard"
	"github.com/netclass-dev/netclass/plugins/qosport"
)

// cmdCheck verifies the VF's settings on the PF, the pod's interface (MAC,
// MTU, state, addresses, routes), every qdisc and rule of its QoS, and
// IPAM's allocation, against the configuration and prevResult.
func (p plugin) cmdCheck(args *skel.CmdArgs) error {
	c, err := netconf.ParseSRIOV(args.StdinData)
	if err != nil {
		return err
	}
	mac, err := attach.ParseMAC(c.MAC(attach.CNIArg(args.Args, "MAC"), c.Mac))
	if err != nil {
		return err
	}
	prev, err := attach.BeginCheck(context.Background(), c.CNIVersion, c.RawPrevResult, args.Netns, ipamOf(c))
	if err != nil {
		return err
	}
	if err := p.check(c, args, prev, wantedVF(c, mac)); err != nil {
		return attach.Internal(err, nil)
	}
	return nil
}

func (p plugin) check(c *netconf.SRIOV, args *skel.CmdArgs, prev *current.Result, want vfState) error {
	rec, err := store(c).Get(c.Name, args.ContainerID, args.IfName)
	if err != nil {
		return err
	}
	if rec == nil {
		return fmt.Errorf("no record of attachment %s/%s of network %q", args.ContainerID, args.IfName, c.Name)
	}
	st, err := stateOf(rec)
	if err != nil {
		return err
	}
	if !want.isZero() {
		actual, err := p.vfs.VF(st.PF, st.VFIndex)
		if err != nil {
			return fmt.Errorf("read settings of VF %s: %w", st.PCI, err)
		}
		if d := want.diff(actual); len(d) > 0 {
			return fmt.Errorf("VF %s (VF %d of %q): %s", st.PCI, st.VFIndex, st.PF, strings.Join(d, "; "))
		}
	}
	if st.Userspace {
		return nil
	}
	if err := checkPod(c, args, prev); err != nil {
		return fmt.Errorf("check %q in %s: %w", args.IfName, args.Netns, err)
	}
	return checkQoS(c, args, prev)
}

func checkPod(c *netconf.SRIOV, args *skel.CmdArgs, prev *current.Result) error {
	var want *current.Interface
	for _, i := range prev.Interfaces {
		if i.Name == args.IfName && i.Sandbox != "" {
			want = i
		}
	}
	if want == nil {
		return fmt.Errorf("prevResult has no interface %q in a sandbox", args.IfName)
	}
	return netns.Do(args.Netns, func() error {
		l, err := link.ByName(args.IfName)
		if err != nil {
			return err
		}
		a := l.Attrs()
		switch {
		case want.Mac != "" && a.HardwareAddr.String() != want.Mac:
			return fmt.Errorf("%q has MAC %s, want %s", args.IfName, a.HardwareAddr, want.Mac)
		case c.MTU != 0 && a.MTU != c.MTU:
			return fmt.Errorf("%q has MTU %d, want %d", args.IfName, a.MTU, c.MTU)
		case a.Flags&1 == 0:
			return fmt.Errorf("%q is down", args.IfName)
		}
		if err := ip.ValidateExpectedInterfaceIPs(args.IfName, prev.IPs); err != nil {
			return err
		}
		return ip.ValidateExpectedRoute(prev.Routes)
	})
}

// checkQoS verifies the shaping and rules, and that an offloaded egress
// rate is not also shaped by a qdisc.
func checkQoS(c *netconf.SRIOV, args *skel.CmdArgs, prev *current.Result) error {
	if err := portguard.CheckInPod(c.PortSecurity, args.Netns, args.IfName, prev); err != nil {
		return fmt.Errorf("port security of %q: %w", args.IfName, err)
	}
	a := qosport.Attachment{PodNS: args.Netns, IfName: args.IfName}
	if err := qosport.Check(a, qos.Compile(c.ShapedQoS())); err != nil {
		return fmt.Errorf("qos of %q: %w", args.IfName, err)
	}
	if c.OffloadedEgressMbps() == 0 {
		return nil
	}
	return netns.Do(args.Netns, func() error {
		l, err := link.ByName(args.IfName)
		if err != nil {
			return err
		}
		return tc.CheckNoRootTBF(l)
	})
}
