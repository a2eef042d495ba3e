package qosport

import (
	"fmt"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"

	"github.com/netclass-dev/netclass/conf/qos"
	"github.com/netclass-dev/netclass/plugins/kernel/link"
	"github.com/netclass-dev/netclass/plugins/kernel/netns"
	"github.com/netclass-dev/netclass/plugins/kernel/nft"
)

// syncPod brings the rules of an interface without a host port (they live
// in the pod's namespace) to the plan in place.
func syncPod(a Attachment, plan *qos.Plan) (bool, error) {
	var changed bool
	err := nft.InNamespace(a.PodNS, func(c *nftables.Conn) error {
		var err error
		changed, err = nft.SyncPodQoS(c, a.IfName, plan)
		return err
	})
	if err != nil {
		return changed, fmt.Errorf("update the rules of %q: %w", a.IfName, err)
	}
	return changed, nil
}

// HostEnd returns the host end of the pod's interface: the peer of a veth
// when it lives in the calling thread's namespace, "" for any other
// interface (or a veth whose peer is elsewhere).
func HostEnd(podNS, ifname string) (string, error) {
	host, err := HostLink(podNS, ifname)
	if err != nil || host == nil {
		return "", err
	}
	return host.Attrs().Name, nil
}

// HostLink is HostEnd's link as read (nil: none).
func HostLink(podNS, ifname string) (netlink.Link, error) {
	var podIndex, peerIndex int
	err := netns.Do(podNS, func() error {
		l, err := link.ByName(ifname)
		if err != nil {
			return err
		}
		podIndex, peerIndex = l.Attrs().Index, link.VethPeer(l)
		return nil
	})
	if err != nil || peerIndex == 0 {
		return nil, err
	}
	host, err := link.ByIndex(peerIndex)
	if err != nil || link.VethPeer(host) != podIndex {
		return nil, nil // the peer lives in another namespace, or an interface of the same index is not it
	}
	// Indexes are per namespace: the host interface must also link to the
	// pod's namespace, or a pod's own veth pair could name another pod's
	// host end (or any host veth) as its peer.
	if ok, err := link.LinksTo(host, podNS); err != nil || !ok {
		return nil, err
	}
	return host, nil
}

// Interface is a pod interface whose rules SyncInterfaces brings to Plan.
type Interface struct {
	PodNS, IfName string
	Plan          *qos.Plan
	// HostIngress puts the rules of a veth whose host end is in no bridge
	// (a routed primary CNI's) at its host end's ingress, out of the pod's
	// reach, instead of in the pod (syncHostIngress); netclass's own
	// attachments keep them in the pod.
	HostIngress bool
}

// Result is what a sync did to one interface.
type Result struct {
	Changed bool
	Err     error
}

// SyncInterfaces brings the DSCP and metered rules of pod interfaces to
// their plans in place, where Apply puts them, each interface known by its
// pod's side only (the host end is found with HostEnd): what netclass-dra's
// rule agent runs. The ports of bridged veths are synced together
// (nft.SyncPorts: few transactions), the other interfaces one by one in
// their pods' namespaces. Only the rules: shaping comes from the network
// and the claim, which do not change under a running attachment. The
// rules' shape is the one Apply installs (plugins/kernel/nft renders both).
// Results are in the order of ifs.
func SyncInterfaces(ifs []Interface) []Result {
	out := make([]Result, len(ifs))
	ports, at := map[string]*qos.Plan{}, map[string]int{}
	for i, f := range ifs {
		a, port, err := locate(f)
		switch {
		case err != nil:
			out[i].Err = fmt.Errorf("interface %q of %s: %w", f.IfName, f.PodNS, err)
		case port:
			ports[a.HostIf], at[a.HostIf] = f.Plan, i
		case f.HostIngress && a.HostIf != "":
			out[i].Changed, out[i].Err = syncHostIngress(a, f.Plan)
		default:
			out[i].Changed, out[i].Err = syncPod(a, f.Plan)
		}
	}
	if len(ports) == 0 {
		return out
	}
	c, err := nft.OpenCurrent()
	if err != nil {
		for _, i := range at {
			out[i].Err = err
		}
		return out
	}
	for h, r := range nft.SyncPorts(c, ports) {
		out[at[h]] = Result{Changed: r.Changed, Err: r.Err}
		if r.Err != nil {
			out[at[h]].Err = fmt.Errorf("update the rules of %q on %q: %w", ifs[at[h]].IfName, h, r.Err)
		}
	}
	return out
}

// locate finds where the interface's rules live: its attachment, and
// whether that is a host port.
func locate(f Interface) (Attachment, bool, error) {
	host, err := HostEnd(f.PodNS, f.IfName)
	if err != nil {
		return Attachment{}, false, err
	}
	a := Attachment{PodNS: f.PodNS, IfName: f.IfName, HostIf: host}
	_, port, err := hostPort(a)
	return a, port, err
}
