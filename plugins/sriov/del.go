package sriov

import (
	"context"
	"errors"
	"fmt"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/netclass-dev/netclass/conf/netconf"
	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/plugins/kernel/link"
	"github.com/netclass-dev/netclass/plugins/qos"
)

// cmdDel is idempotent: without a record there is nothing of the
// attachment's but (perhaps) an IPAM allocation; a missing namespace,
// netdev or PF is success.
func (p plugin) cmdDel(args *skel.CmdArgs) error {
	c, err := netconf.ParseSRIOV(args.StdinData)
	if err != nil {
		return err
	}
	rec, err := store(c).Get(c.Name, args.ContainerID, args.IfName)
	if err != nil {
		return attach.Internal(err, nil)
	}
	err = attach.Parallel(
		func() error { return ipamOf(c).Del(context.Background()) },
		func() error { return p.teardown(c, rec, args.Netns) },
	)
	if err != nil {
		return attach.Internal(err, nil)
	}
	return nil
}

// teardown gives the VF back: QoS off, netdev back to the host with its
// identity, PF-side settings restored, then the record goes. netnsPath ""
// means the record's.
func (p plugin) teardown(c *netconf.SRIOV, rec *attach.Record, netnsPath string) error {
	if rec == nil {
		return nil
	}
	st, err := stateOf(rec)
	if err != nil {
		return err
	}
	if netnsPath == "" {
		netnsPath = rec.NetNS
	}
	if !st.Userspace {
		a := qos.Attachment{PodNS: netnsPath, IfName: rec.IfName}
		if err := errors.Join(qos.Remove(a), p.moveOut(netnsPath, rec.IfName, st)); err != nil {
			return err
		}
	}
	if err := p.restoreVF(st); err != nil {
		return err
	}
	return store(c).Delete(rec.Network, rec.ContainerID, rec.IfName)
}

// restoreVF puts back the PF-side settings the attachment changed, each on
// its own, so one the driver refuses does not keep the others from being
// restored. A PF that is gone has nothing to restore.
func (p plugin) restoreVF(st *state) error {
	if st.VF == nil {
		return nil
	}
	var errs []error
	for _, s := range st.VF.settings() {
		err := p.vfs.SetVF(st.PF, st.VFIndex, s)
		if link.IsNotFound(err) {
			return nil
		}
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("restore settings of VF %s: %w", st.PCI, err)
	}
	return nil
}

// cmdGC gives back the VF of every recorded attachment of this network that
// is not in cni.dev/valid-attachments, then lets IPAM collect.
func (p plugin) cmdGC(args *skel.CmdArgs) error {
	c, err := netconf.ParseSRIOV(args.StdinData)
	if err != nil {
		return err
	}
	recs, err := store(c).List(c.Name)
	if err != nil {
		return attach.Internal(err, nil)
	}
	valid := attach.Valid(c.ValidAttachments)
	var errs []error
	for _, r := range recs {
		if !valid[r.Key()] {
			errs = append(errs, ipamOf(c).ReleaseFor(context.Background(), r), p.teardown(c, r, ""))
		}
	}
	errs = append(errs, ipamOf(c).GC(context.Background()))
	if err := errors.Join(errs...); err != nil {
		return attach.Internal(err, nil)
	}
	return nil
}
