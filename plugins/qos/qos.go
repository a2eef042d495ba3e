// Package qos applies a compiled qos.Plan to one attachment, composing the
// tc and nft mechanisms. It is what makes shaping, DSCP marking and metered
// rules work the same on every interface type:
//
//   - egress shaping: tbf as the root qdisc of the pod's interface;
//   - ingress shaping: tbf on the host end of the pod's veth when there is
//     one (no extra device), otherwise the pod interface's ingress is
//     redirected to an IFB in the pod's namespace and shaped there
//     (macvlan, vlan, VF...);
//   - DSCP and metered rules: one nftables table per interface in the pod's
//     namespace, hooked at postrouting.
//
// Everything lives in the pod's namespace except the host-veth tbf, so it
// disappears with the pod even if DEL never comes.
package qos

import (
	"errors"
	"fmt"
	"hash/fnv"

	cfg "github.com/netclass-dev/netclass/conf/qos"
	"github.com/netclass-dev/netclass/plugins/kernel/link"
	"github.com/netclass-dev/netclass/plugins/kernel/netns"
	"github.com/netclass-dev/netclass/plugins/kernel/nft"
	"github.com/netclass-dev/netclass/plugins/kernel/tc"
)

// Attachment names the interface QoS applies to.
type Attachment struct {
	PodNS  string // path of the pod's network namespace
	IfName string // the interface inside it
	// HostIf is the host end of the pod's veth in the calling thread's
	// namespace, or "" when the interface has no such peer.
	HostIf string
}

// IFBName is the IFB carrying the interface's ingress inside the pod's
// namespace: derived from the interface name so DEL and CHECK find it.
func IFBName(ifname string) string {
	h := fnv.New32a()
	h.Write([]byte(ifname))
	return fmt.Sprintf("ncifb%08x", h.Sum32())
}

// Apply sets the plan up. On failure it removes what it made and returns
// the error: nothing is left half-configured.
func Apply(a Attachment, plan *cfg.Plan) error {
	if plan.IsZero() {
		return nil
	}
	if err := apply(a, plan); err != nil {
		return errors.Join(err, Remove(a))
	}
	return nil
}

func apply(a Attachment, plan *cfg.Plan) error {
	pod, err := netns.Open(a.PodNS)
	if err != nil {
		return err
	}
	defer pod.Close()
	err = netns.Do(a.PodNS, func() error {
		l, err := link.ByName(a.IfName)
		if err != nil {
			return err
		}
		if plan.Egress != nil {
			if err := tc.SetRootTBF(l.Attrs().Index, tbf(plan.Egress)); err != nil {
				return err
			}
		}
		if plan.Ingress != nil && a.HostIf == "" {
			ifb, err := link.CreateIFB(IFBName(a.IfName), l.Attrs().MTU, "netclass ingress of "+a.IfName)
			if err != nil {
				return err
			}
			if err := tc.SetRootTBF(ifb.Attrs().Index, tbf(plan.Ingress)); err != nil {
				return err
			}
			return tc.RedirectIngress(l.Attrs().Index, ifb.Attrs().Index)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("shape %q: %w", a.IfName, err)
	}
	if plan.Ingress != nil && a.HostIf != "" {
		host, err := link.ByName(a.HostIf)
		if err != nil {
			return err
		}
		if err := tc.SetRootTBF(host.Attrs().Index, tbf(plan.Ingress)); err != nil {
			return fmt.Errorf("shape ingress of %q on %q: %w", a.IfName, a.HostIf, err)
		}
	}
	if plan.NeedsRules() {
		c, err := nft.Open(int(pod.Fd()))
		if err != nil {
			return err
		}
		if err := nft.ApplyQoS(c, a.IfName, plan); err != nil {
			return fmt.Errorf("mark and meter %q: %w", a.IfName, err)
		}
	}
	return nil
}

func tbf(s *cfg.Shaper) tc.TBF { return tc.TBF{RateBytes: s.RateBytes, BurstBytes: s.BurstBytes} }

// RemoveRules deletes what would outlive the pod's interface: the nftables
// table and the IFB. Callers about to delete the interface use it instead of
// Remove, since the interface's qdiscs (and its veth peer's) go with it.
func RemoveRules(a Attachment) error {
	pod, err := netns.Open(a.PodNS)
	if errors.Is(err, netns.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	defer pod.Close()
	c, err := nft.Open(int(pod.Fd()))
	if err != nil {
		return err
	}
	return errors.Join(nft.DeleteQoS(c, a.IfName), netns.Do(a.PodNS, func() error { return link.Delete(IFBName(a.IfName)) }))
}

// Remove deletes everything Apply may have made; what is already gone
// (including the whole namespace) is success.
func Remove(a Attachment) error {
	var errs []error
	if a.HostIf != "" {
		errs = append(errs, removeHostShaping(a.HostIf))
	}
	pod, err := netns.Open(a.PodNS)
	if errors.Is(err, netns.ErrNotFound) {
		return errors.Join(errs...)
	}
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	defer pod.Close()
	if c, err := nft.Open(int(pod.Fd())); err != nil {
		errs = append(errs, err)
	} else {
		errs = append(errs, nft.DeleteQoS(c, a.IfName))
	}
	errs = append(errs, netns.Do(a.PodNS, func() error {
		errs := []error{link.Delete(IFBName(a.IfName))}
		l, err := link.ByName(a.IfName)
		if link.IsNotFound(err) {
			return errors.Join(errs...)
		}
		if err != nil {
			return errors.Join(append(errs, err)...)
		}
		errs = append(errs, tc.DeleteRoot(l.Attrs().Index), tc.DeleteIngress(l.Attrs().Index))
		return errors.Join(errs...)
	}))
	return errors.Join(errs...)
}

func removeHostShaping(hostIf string) error {
	host, err := link.ByName(hostIf)
	if link.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return tc.DeleteRoot(host.Attrs().Index)
}
