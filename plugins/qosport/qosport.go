// Package qosport applies a compiled qos.Plan to one attachment, composing the
// tc and nft mechanisms, the way a metering switch port would: a packet
// over a meter's rate is dropped on its way, never turned into an error on
// the sending socket, and where the attachment has a port on the host the
// rules live there, out of the pod's reach.
//
// A veth whose host end is a port of a Linux bridge (netclass-bridge,
// netclass-vxlan, netclass-qos after the upstream bridge) is a switch port,
// and everything is enforced on its host end:
//
//   - egress shaping: the host end's ingress is redirected (u32 + mirred)
//     to an IFB of the host (HostIFBName), whose root tbf shapes it;
//   - ingress shaping: tbf as the root qdisc of the host end;
//   - DSCP and metered rules: the host end's chain in the host's shared
//     `bridge netclass_qos` table (plugins/kernel/nft), at bridge prerouting.
//
// The pod's egress thus meets the shaper first, then marking and metering,
// then the bridge: the IFB hands the shaped packet back past the host end's
// netfilter ingress hook, so a hook there would never see it, while the
// bridge's prerouting hook does (and marking there is what the receiver and
// a VXLAN encapsulation carry). OVN-Kubernetes orders a port's egress the
// same way (its policing before its QoS meters). Nothing lives in the pod's
// namespace: a pod with CAP_NET_ADMIN cannot remove any of it.
//
// Any other interface (macvlan, ipvlan, VLAN in the pod, VF, a veth whose host end is
// routed or in another kind of switch) has no port on the host, and its
// QoS lives in the pod's namespace, within reach of a pod with
// CAP_NET_ADMIN:
//
//   - egress shaping: tbf as the root qdisc of the pod's interface;
//   - ingress shaping: tbf on the veth's host end when there is one,
//     otherwise the interface's ingress is redirected to an IFB in the
//     pod's namespace (IFBName) and shaped there;
//   - DSCP and metered rules: a `netdev` table in the pod's namespace
//     hooked at the interface's egress (Linux 5.16+), before its qdisc.
//
// The pods' primary interface (eth0, made by the cluster's primary CNI,
// which netclass never owns) gets only rules, through SyncInterfaces: on
// a bridged veth in the shared bridge table as above; on a routed veth
// (Interface.HostIngress: upstream ptp, Calico) in a `netdev` table of the
// host end's own hooked at its ingress (nft.HostIngressTable), out of the
// pod's reach — unless the CNI hooks that ingress in tc (an ingress or
// clsact qdisc, which runs first and may redirect packets past netfilter),
// when they stay in the pod at the interface's egress. netclass adds its
// own tables only: the CNI's qdiscs, filters and tables are never touched.
//
// Without the hook the plan needs, Apply fails with an *nft.FeatureError
// naming it: never a meter at the IP output path, whose drops reach the
// sender as EPERM.
package qosport

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"

	"github.com/vishvananda/netlink"

	"github.com/netclass-dev/netclass/conf/qos"
	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/plugins/kernel/link"
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

// HostIFBName is the IFB on the host that shapes what the pod sends
// through the host end hostIf: derived from the host end's name (unique on
// the host, recorded with the attachment) so DEL, CHECK and GC find it when
// the host end or the pod is gone. "ncq" + 12 hex digits never collides
// with netclass's veth names ("nc" + 11 hex digits).
func HostIFBName(hostIf string) string {
	sum := sha256.Sum256([]byte(hostIf))
	return "ncq" + hex.EncodeToString(sum[:])[:12]
}

// Apply sets the plan up. On failure it removes what it made and returns
// the error: nothing is left half-configured.
func Apply(a Attachment, plan *qos.Plan) error {
	if plan.IsZero() {
		return nil
	}
	if err := apply(a, plan); err != nil {
		return errors.Join(err, Remove(a))
	}
	return nil
}

func apply(a Attachment, plan *qos.Plan) error {
	host, port, err := hostPort(a)
	if err != nil {
		return err
	}
	if port {
		return applyHost(a, host, plan)
	}
	return applyPod(a, host, plan)
}

// hostPort returns the host end (nil without one) and whether the
// attachment's QoS goes there: whether it is a port of a Linux bridge.
func hostPort(a Attachment) (netlink.Link, bool, error) {
	if a.HostIf == "" {
		return nil, false, nil
	}
	host, err := link.ByName(a.HostIf)
	if err != nil {
		return nil, false, err
	}
	port, err := link.IsBridgePort(host)
	return host, port, err
}

func tbf(s *qos.Shaper) tc.TBF { return tc.TBF{RateBytes: s.RateBytes, BurstBytes: s.BurstBytes} }

// RemoveRules deletes what would outlive the pod's interface: the rules
// (on the host and in the pod) and the IFBs. Callers about to delete the
// interface use it instead of Remove, since the interface's qdiscs (and its
// veth peer's) go with it. The deletions run at once: each waits for the
// kernel (an RCU grace period), and the waits then overlap.
func RemoveRules(a Attachment) error {
	steps := []func() error{func() error { return removePodRules(a) }}
	if a.HostIf != "" {
		steps = append(steps, func() error { return removePortRules(a.HostIf) }, func() error { return removeHostIFB(a.HostIf) })
	}
	return attach.Parallel(steps...)
}

// Remove deletes everything Apply may have made, wherever it lives; what
// is already gone (the host end, the whole namespace) is success.
func Remove(a Attachment) error {
	return errors.Join(RemoveRules(a), removeHostShaping(a.HostIf), removePodShaping(a))
}
