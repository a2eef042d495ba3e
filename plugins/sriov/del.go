package sriov

import (
	"context"
	"errors"
	"fmt"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/netclass-dev/netclass/conf/netconf"
	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/plugins/kernel/link"
	"github.com/netclass-dev/netclass/plugins/portguard"
	"github.com/netclass-dev/netclass/plugins/qosport"
)

// cmdDel is idempotent: without a record there is nothing of the
// attachment's but (perhaps) an IPAM allocation; a missing namespace,
// netdev or PF is success.
func (p plugin) cmdDel(args *skel.CmdArgs) error {
	c, err := netconf.ParseSRIOV(args.StdinData)
	if err != nil {
		return err
	}
	rec, err := store(c).ForDel(c.Name, args)
	if err != nil {
		return attach.Internal(err, nil)
	}
	return attach.Del(context.Background(), ipamOf(c), rec, func(r *attach.Record) error { return p.teardown(c, r) })
}

// teardown gives the VF back: QoS off, netdev back to the host with its
// identity, PF-side settings restored, then the record goes. A record
// without state (no ADD recorded one) has nothing to give back.
func (p plugin) teardown(c *netconf.SRIOV, rec *attach.Record) error {
	if len(rec.Extra) == 0 {
		return nil
	}
	st, err := stateOf(rec)
	if err != nil {
		return err
	}
	if !st.Userspace {
		// The rules and the IFB outlive the netdev's move; its qdiscs do not.
		a := qosport.Attachment{PodNS: rec.NetNS, IfName: rec.IfName}
		if err := errors.Join(qosport.RemoveRules(a), portguard.RemoveInPod(rec.NetNS, rec.IfName), p.moveOut(rec.NetNS, st)); err != nil {
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
	return attach.GC(context.Background(), store(c), c.Name, c.ValidAttachments, ipamOf(c),
		func(r *attach.Record) error { return p.teardown(c, r) })
}
