package sriov

import (
	"context"
	"fmt"
	"net"

	"github.com/containernetworking/cni/pkg/skel"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/netclass-dev/netclass/conf/netconf"
	"github.com/netclass-dev/netclass/conf/qos"
	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/plugins/kernel/sysfs"
	"github.com/netclass-dev/netclass/plugins/portguard"
	"github.com/netclass-dev/netclass/plugins/qosport"
)

func (p plugin) cmdAdd(args *skel.CmdArgs) error {
	c, err := netconf.ParseSRIOV(args.StdinData)
	if err != nil {
		return err
	}
	var undo attach.Undo
	res, err := p.add(context.Background(), c, args, &undo)
	if err != nil {
		return attach.Internal(err, undo.Run())
	}
	return attach.Print(res, c.CNIVersion)
}

// add performs an ADD, pushing the inverse of every step onto undo.
func (p plugin) add(ctx context.Context, c *netconf.SRIOV, args *skel.CmdArgs, undo *attach.Undo) (*current.Result, error) {
	mac, err := attach.ParseMAC(c.MAC(attach.CNIArg(args.Args, "MAC"), c.Mac))
	if err != nil {
		return nil, err
	}
	if err := attach.UsableNetNS(args.Netns); err != nil {
		return nil, err
	}
	want := wantedVF(c, mac)
	vf, st, err := p.claim(c, args, want)
	if err != nil {
		return nil, err
	}
	var k keeper
	undo.Push(func() error { return k.deleteRecord(c, args) })
	if st.VF != nil {
		undo.Push(k.track(func() error { return p.restoreVF(st) }))
		if err := p.vfs.SetVF(st.PF, st.VFIndex, want); err != nil {
			return nil, fmt.Errorf("configure VF %s: %w", vf.Addr, err)
		}
	}
	res, err := ipamOf(c).Add(ctx)
	if err != nil {
		return nil, err
	}
	undo.Push(k.track(func() error { return ipamOf(c).Del(ctx) }))
	res.Interfaces = []*current.Interface{{Name: args.IfName, Sandbox: args.Netns, PciID: vf.Addr}}
	for _, ipc := range res.IPs {
		ipc.Interface = current.Int(0)
	}
	res.DNS = c.DNS
	if err := recordAddresses(c, args, res); err != nil {
		return nil, err
	}
	if st.Userspace {
		res.Interfaces[0].Mac = want.MAC
		return res, nil
	}
	return res, p.attachNetdev(c, args, st, mac, res, undo, &k)
}

// recordAddresses puts the allocated addresses on the attachment's record
// (claim wrote it before IPAM ran).
func recordAddresses(c *netconf.SRIOV, args *skel.CmdArgs, res *current.Result) error {
	rec, err := store(c).Get(c.Name, args.ContainerID, args.IfName)
	if err != nil || rec == nil {
		return err
	}
	rec.Addressed(res)
	return store(c).Put(rec)
}

// keeper keeps a failed ADD's record when a step of its cleanup fails: the
// record holds what the VF is to get back, so the DEL or GC that follows
// can finish the job.
type keeper struct{ failed bool }

func (k *keeper) track(step func() error) func() error {
	return func() error {
		err := step()
		k.failed = k.failed || err != nil
		return err
	}
}

func (k *keeper) deleteRecord(c *netconf.SRIOV, args *skel.CmdArgs) error {
	if k.failed {
		return nil
	}
	return store(c).Delete(c.Name, args.ContainerID, args.IfName)
}

// claim picks the VF and records the attachment with the VF's original
// state, under the PF's lock, so two ADDs never take one VF.
func (p plugin) claim(c *netconf.SRIOV, args *skel.CmdArgs, want vfState) (sysfs.VF, *state, error) {
	pf, vfs, err := p.candidates(c)
	if err != nil {
		return sysfs.VF{}, nil, err
	}
	unlock, err := attach.Lock(c.DataDir, "sriov-"+pf)
	if err != nil {
		return sysfs.VF{}, nil, err
	}
	defer unlock()
	if rec, err := store(c).Get(c.Name, args.ContainerID, args.IfName); err != nil || rec != nil {
		return sysfs.VF{}, nil, existing(rec, err)
	}
	inUse, err := held(c.DataDir)
	if err != nil {
		return sysfs.VF{}, nil, err
	}
	vf, netdev, err := pick(c, vfs, inUse)
	if err != nil {
		return sysfs.VF{}, nil, err
	}
	if err := userspaceLimits(c, vf); err != nil {
		return sysfs.VF{}, nil, err
	}
	st, err := p.snapshot(vf, netdev, want)
	if err != nil {
		return sysfs.VF{}, nil, err
	}
	extra, err := st.encode()
	if err != nil {
		return sysfs.VF{}, nil, err
	}
	rec := &attach.Record{Network: c.Name, Plugin: netconf.TypeSRIOV, ContainerID: args.ContainerID,
		IfName: args.IfName, NetNS: args.Netns, Config: c.Raw, Extra: extra}
	return vf, st, store(c).Put(rec)
}

func existing(rec *attach.Record, err error) error {
	if err != nil {
		return err
	}
	return attach.Invalid("attachment %s/%s of network %q already exists: DEL it first", rec.ContainerID, rec.IfName, rec.Network)
}

// userspaceLimits refuses what a VF without a netdev cannot do.
func userspaceLimits(c *netconf.SRIOV, vf sysfs.VF) error {
	if !vf.Userspace() {
		return nil
	}
	if c.MTU != 0 {
		return attach.Invalid("mtu: VF %s is bound to %s and has no netdev to set an MTU on", vf.Addr, vf.Driver)
	}
	if !c.ShapedQoS().IsZero() {
		return attach.Invalid("qos: VF %s is bound to %s and has no netdev for qdiscs and rules: only egressRate applies, with offloadEgressRate", vf.Addr, vf.Driver)
	}
	return nil
}

// snapshot is the VF's state before the attachment changes it: its netdev's
// host identity, and the original values of the PF-side settings it sets.
func (p plugin) snapshot(vf sysfs.VF, netdev string, want vfState) (*state, error) {
	st := &state{PCI: vf.Addr, PF: vf.PF, VFIndex: vf.Index, Userspace: vf.Userspace()}
	if netdev != "" {
		var err error
		if st.Netdev, err = snapshotNetdev(netdev); err != nil {
			return nil, err
		}
	}
	if !want.isZero() {
		cur, err := p.vfs.VF(vf.PF, vf.Index)
		if err != nil {
			return nil, fmt.Errorf("read settings of VF %s: %w", vf.Addr, err)
		}
		orig := cur.only(want)
		st.VF = &orig
	}
	return st, nil
}

// attachNetdev moves the VF's netdev into the pod, configures it and
// applies QoS.
func (p plugin) attachNetdev(c *netconf.SRIOV, args *skel.CmdArgs, st *state, mac net.HardwareAddr, res *current.Result, undo *attach.Undo, k *keeper) error {
	pod := podIf{NetNS: args.Netns, IfName: args.IfName, MTU: c.MTU, MAC: mac}
	undo.Push(k.track(func() error { return p.moveOut(args.Netns, st) }))
	if err := moveIn(st.Netdev.Name, st.PCI, pod); err != nil {
		return err
	}
	if err := configure(pod, res); err != nil {
		return err
	}
	if c.PortSecurity != nil {
		undo.Push(k.track(func() error { return portguard.RemoveInPod(args.Netns, args.IfName) }))
		if err := portguard.SecureInPod(c.PortSecurity, args.Netns, args.IfName, res); err != nil {
			return err
		}
	}
	plan := qos.Compile(c.ShapedQoS())
	if plan.IsZero() {
		return nil
	}
	a := qosport.Attachment{PodNS: args.Netns, IfName: args.IfName}
	if err := qosport.Apply(a, plan); err != nil {
		return err
	}
	undo.Push(k.track(func() error { return qosport.Remove(a) }))
	return nil
}
