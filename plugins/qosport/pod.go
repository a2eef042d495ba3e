package qosport

import (
	"errors"
	"fmt"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"

	"github.com/netclass-dev/netclass/conf/qos"
	"github.com/netclass-dev/netclass/plugins/kernel/link"
	"github.com/netclass-dev/netclass/plugins/kernel/netns"
	"github.com/netclass-dev/netclass/plugins/kernel/nft"
	"github.com/netclass-dev/netclass/plugins/kernel/tc"
)

// applyPod enforces the plan in the pod's namespace (host: the veth's host
// end when the interface has one outside a bridge, shaping its ingress).
func applyPod(a Attachment, host netlink.Link, plan *qos.Plan) error {
	// Rules first: a kernel without the egress hook fails here, before
	// anything else is made.
	if plan.NeedsRules() {
		if err := nft.InNamespace(a.PodNS, func(c *nftables.Conn) error { return nft.ApplyPodQoS(c, a.IfName, plan) }); err != nil {
			return fmt.Errorf("mark and meter %q: %w", a.IfName, err)
		}
	}
	err := netns.Do(a.PodNS, func() error {
		l, err := link.ByName(a.IfName)
		if err != nil {
			return err
		}
		if plan.Egress != nil {
			if err := shape(l, fmt.Sprintf("the egress of %q", a.IfName), plan.Egress, plan); err != nil {
				return err
			}
		}
		if plan.Ingress != nil && host == nil {
			ifb, err := link.CreateIFB(IFBName(a.IfName), l.Attrs().MTU, "netclass ingress of "+a.IfName, 0)
			if err != nil {
				return err
			}
			if err := shape(ifb, fmt.Sprintf("the ingress of %q", a.IfName), plan.Ingress, plan); err != nil {
				return err
			}
			return tc.RedirectIngress(l.Attrs().Index, ifb.Attrs().Index)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("shape %q: %w", a.IfName, err)
	}
	if plan.Ingress != nil && host != nil {
		if err := shape(host, fmt.Sprintf("the ingress of %q", a.IfName), plan.Ingress, plan); err != nil {
			return fmt.Errorf("shape ingress of %q on %q: %w", a.IfName, a.HostIf, err)
		}
	}
	return nil
}

// removePodRules deletes the interface's table and IFB in the pod; a
// namespace that is gone took them with it.
func removePodRules(a Attachment) error {
	err := errors.Join(
		nft.InNamespace(a.PodNS, func(c *nftables.Conn) error { return nft.DeletePodQoS(c, a.IfName) }),
		netns.Do(a.PodNS, func() error { return link.DeleteIFB(IFBName(a.IfName)) }),
	)
	if errors.Is(err, netns.ErrNotFound) {
		return nil
	}
	return err
}

// checkNoPodRules verifies the pod holds no netclass table for the
// interface (the rules of a bridged veth are on its host end).
func checkNoPodRules(a Attachment) error {
	return nft.InNamespace(a.PodNS, func(c *nftables.Conn) error {
		found, err := nft.HasAnyPodQoS(c, a.IfName)
		if err == nil && found {
			err = fmt.Errorf("the pod holds nftables table %s for %q: its rules belong on the host end", nft.PodQoSTable(a.IfName), a.IfName)
		}
		return err
	})
}

// removePodShaping deletes the pod interface's qdiscs.
func removePodShaping(a Attachment) error {
	err := netns.Do(a.PodNS, func() error {
		l, err := link.ByName(a.IfName)
		if link.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return errors.Join(tc.DeleteRoot(l.Attrs().Index), tc.DeleteIngress(l.Attrs().Index))
	})
	if errors.Is(err, netns.ErrNotFound) {
		return nil
	}
	return err
}

// checkPod verifies everything applyPod makes.
func checkPod(a Attachment, host netlink.Link, plan *qos.Plan) error {
	err := netns.Do(a.PodNS, func() error {
		l, err := link.ByName(a.IfName)
		if err != nil {
			return err
		}
		if plan.Egress != nil {
			if err := checkShaper(l, plan.Egress, plan); err != nil {
				return fmt.Errorf("egress shaping: %w", err)
			}
		}
		if plan.Ingress != nil && host == nil {
			return checkPodIFB(a, l, plan)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if plan.Ingress != nil && host != nil {
		if err := checkShaper(host, plan.Ingress, plan); err != nil {
			return fmt.Errorf("ingress shaping: %w", err)
		}
	}
	if !plan.NeedsRules() {
		return nil
	}
	return nft.InNamespace(a.PodNS, func(c *nftables.Conn) error { return nft.CheckPodQoS(c, a.IfName, plan) })
}

func checkPodIFB(a Attachment, l netlink.Link, plan *qos.Plan) error {
	ifb, err := link.ByName(IFBName(a.IfName))
	if err != nil {
		return fmt.Errorf("ingress shaping: %w", err)
	}
	if err := checkShaper(ifb, plan.Ingress, plan); err != nil {
		return fmt.Errorf("ingress shaping: %w", err)
	}
	if err := checkRedirect(l, ifb); err != nil {
		return fmt.Errorf("ingress shaping: %w", err)
	}
	return nil
}
