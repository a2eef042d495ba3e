package ruleagent

import (
	"context"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/netclass-dev/netclass/conf/qos"
	"github.com/netclass-dev/netclass/shim/attachment"
	"github.com/netclass-dev/netclass/shim/checkpoint"
	"github.com/netclass-dev/netclass/shim/network"
	"github.com/netclass-dev/netclass/shim/render"
)

// ForeignAttachment is a netclass attachment netclass-dra did not make:
// a netclass plugin run by Multus for a NetworkAttachmentDefinition
// (hand-written or generated), as the plugin's on-disk record
// (plugins/attach.Record) and the pod's network-status annotation
// describe it. The agent gives it the policies and NetworkQoS of its NAD's
// network as it gives claim attachments theirs; it never touches a claim
// attachment's interface for it, nor the other way round (they are told
// apart by sandbox and interface name).
type ForeignAttachment struct {
	Pod    types.NamespacedName
	PodUID types.UID
	// SandboxID is the pod sandbox's ID (the record's CNI container ID).
	SandboxID string
	IfName    string
	NetNS     string
	// NAD is the NetworkAttachmentDefinition the attachment was made from
	// (namespace/name, from the pod's network-status entry of IfName): the
	// attachment's network identity, what policy-for and NetworkQoS NAD
	// selectors name.
	NAD types.NamespacedName
	// HostIf is the host end of the pod's veth ("" without one).
	HostIf string
	// MAC and CIDRs are the interface's, as the plugin's record reports
	// them (never the pod's network-status, which whoever may update the
	// pod can edit; an empty MAC, from a record of an earlier release, is
	// read from the pod's interface).
	MAC   string
	CIDRs []string
	// Base is the QoS the plugin applied at ADD (its configuration's qos
	// with runtimeConfig and args.cni.qos merged over it; nil: none):
	// NetworkQoS rules are added to it, and it is what the interface goes
	// back to when none selects it any more.
	Base *qos.Spec
	// Unnamed: the pod's network-status does not (or no longer) name the
	// interface's NAD (NAD is zero): not written yet, edited, or the
	// interface is not Multus's. Its network unknown, the agent leaves its
	// rules as they are: an edit of the pod's annotations neither opens its
	// port nor removes its QoS; only the record's going does.
	Unnamed bool
	// NotMultus, with Unnamed: the pod asks Multus for no network on the
	// interface (another caller ran the plugin: the runtime's own
	// configuration, cnitool in the pod's namespace; or the pod no longer
	// asks Multus for it), so nothing waits for its network-status.
	NotMultus bool
	// Backing is the network object NAD stands for when netclass-controller
	// generated it (nil otherwise; network.Network.Backing).
	Backing *attachment.NetworkRef
}

// Network is the attachment's network: its NetworkAttachmentDefinition's,
// with the network object behind a generated one.
func (f ForeignAttachment) Network() network.Network {
	n := network.FromNAD(f.NAD)
	n.Backing = f.Backing
	if f.Base != nil {
		n.DSCPPolicy = f.Base.Policy // the NAD config's, which its plugin enforces
	}
	return n
}

// Foreign makes the agent cover the foreign attachments of the node. Build
// it with NewForeign.
type Foreign struct {
	// List returns the node's foreign attachments as they are now.
	List func() []ForeignAttachment
	// RemovePort deletes the rules left on a gone attachment's host end
	// (qosport.RemovePortRules): those the agent wrote after the plugin's
	// DEL had removed the port's.
	RemovePort func(hostIf string) error

	mu sync.Mutex
	// hosts: attachment key -> host end, of the attachments whose QoS the
	// agent changed.
	hosts map[string]string
}

// NewForeign returns the foreign attachments' part of the agent.
func NewForeign(list func() []ForeignAttachment, removePort func(string) error) *Foreign {
	return &Foreign{List: list, RemovePort: removePort, hosts: map[string]string{}}
}

func foreignKey(f ForeignAttachment) string {
	return "foreign/" + string(f.PodUID) + "/" + f.SandboxID + "/" + f.IfName
}

// planForeign computes the plans of the foreign attachments, as
// planDevice does for a claim's: their policies always (when NetPol is
// set), their QoS only while a NetworkQoS selects them or the agent
// changed it (otherwise the plugin's own stays as it is); none for an
// Unnamed one, which keeps what it holds.
func (a *Agent) planForeign(res resolvers, seen map[string]bool) (outs []Outcome, todo []pending) {
	if a.Foreign == nil {
		return nil, nil
	}
	for _, f := range a.Foreign.List() {
		pod, ok := a.pods.Pod(f.Pod.Namespace, f.Pod.Name, f.PodUID)
		if !ok {
			continue // not in the cache yet, or being deleted: the next sync sees it
		}
		key := foreignKey(f)
		seen[key] = true
		if f.Unnamed { // its plans, its port rules and what the agent holds of them stay
			outs = append(outs, a.heldOutcome(f, key))
			continue
		}
		net := f.Network()
		p := pending{key: key, at: checkpoint.Attachment{PodUID: f.PodUID, SandboxID: f.SandboxID, NetNS: f.NetNS, IfName: f.IfName,
			State: checkpoint.Attached, Result: &checkpoint.Result{InterfaceName: f.IfName, MAC: f.MAC, IPs: f.CIDRs}},
			out: Outcome{Pod: f.Pod, PodUID: f.PodUID, IfName: f.IfName, Network: net.Ref, NAD: f.NAD, key: key}}
		target := render.Target{Namespace: f.Pod.Namespace, PodLabels: pod.Labels, Network: net}
		if a.NADs != nil {
			target.NAD = a.NADs.NAD(f.NAD.Namespace, f.NAD.Name)
		}
		p.qos = a.foreignQoS(f, target, key, res.qos, &p.out)
		outs, todo = a.file(p, pod, net, res.pol, outs, todo)
	}
	return outs, todo
}

// heldOutcome is an Unnamed attachment's outcome: its last one's, with
// what it holds (nothing selected when that sync failed: its rules are not
// known to be the plan's) and no error (nothing was tried).
func (a *Agent) heldOutcome(f ForeignAttachment, key string) Outcome {
	out := Outcome{Pod: f.Pod, PodUID: f.PodUID, IfName: f.IfName, key: key}
	a.mu.Lock()
	i := slices.IndexFunc(a.last, func(o Outcome) bool { return o.key == key })
	if i >= 0 && a.last[i].Err == nil {
		out = a.last[i]
	} else if i >= 0 {
		out.Network, out.NAD = a.last[i].Network, a.last[i].NAD
	}
	a.mu.Unlock()
	out.Unnamed, out.NotMultus, out.Changed, out.PolicyChanged = true, f.NotMultus, false, false
	return out
}

// foreignQoS is the attachment's QoS plan to sync (nil: none, or it holds
// it already).
func (a *Agent) foreignQoS(f ForeignAttachment, target render.Target, key string, peers render.Peers, out *Outcome) *qos.Plan {
	a.mu.Lock()
	_, held := a.applied[key]
	a.mu.Unlock()
	objs, err := a.policies.NetworkQoS(target.Namespace)
	if err != nil || (len(objs) == 0 && !held) {
		if err != nil {
			out.QoSErr, out.Err = err, err
		}
		return nil
	}
	plan := a.plan(&checkpoint.Device{QoS: &checkpoint.DeviceQoS{Base: f.Base}}, target, peers, out)
	if plan == nil || (len(out.Selected) == 0 && !held) || a.holds(key, plan) {
		return nil
	}
	if f.HostIf != "" {
		a.Foreign.mu.Lock()
		a.Foreign.hosts[key] = f.HostIf
		a.Foreign.mu.Unlock()
	}
	return plan
}

// applyForeign syncs the pending foreign attachments (no claim to lock:
// an attachment deleted meanwhile fails on its namespace, and a rule
// written on its host end after the plugin's DEL is removed once its
// record is gone, removeGoneForeign).
func (a *Agent) applyForeign(todo []pending) []Outcome {
	if len(todo) == 0 {
		return nil
	}
	qosRes, polRes := a.syncKernel(todo)
	outs := make([]Outcome, 0, len(todo))
	for i, p := range todo {
		outs = append(outs, a.record(p, qosRes[i], polRes[i]))
	}
	return outs
}

// removeGoneForeign removes the port rules of the foreign attachments
// whose QoS the agent changed and that are gone (their record went with
// their DEL); one that fails is tried again at the next sync.
func (a *Agent) removeGoneForeign(ctx context.Context, seen map[string]bool) {
	if a.Foreign == nil {
		return
	}
	f := a.Foreign
	f.mu.Lock()
	defer f.mu.Unlock()
	for key, hostIf := range f.hosts {
		if seen[key] {
			continue
		}
		if err := f.RemovePort(hostIf); err != nil {
			klog.FromContext(ctx).Error(err, "Removing the rules of a gone foreign attachment failed; retried at the next sync", "hostInterface", hostIf)
			continue
		}
		delete(f.hosts, key)
	}
}
