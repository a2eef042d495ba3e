package ruleagent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/netclass-dev/netclass/conf/netpol"
	"github.com/netclass-dev/netclass/conf/qos"
	"github.com/netclass-dev/netclass/plugins/podpolicy"
	"github.com/netclass-dev/netclass/shim/checkpoint"
	"github.com/netclass-dev/netclass/shim/netpolicy"
	"github.com/netclass-dev/netclass/shim/network"
	"github.com/netclass-dev/netclass/shim/render"
)

// Sync brings every running attachment of the node to its desired plan and
// returns what it did, attachment by attachment. The plans are computed
// from a snapshot of the checkpoint; the attachments whose plan differs
// from the one they hold are then synced in one batch (one nftables
// transaction for the node's ports), holding their claims' locks, each
// checked against its claim's current record first.
func (a *Agent) Sync(ctx context.Context) []Outcome {
	start := time.Now()
	var outs []Outcome
	var todo []pending
	seen := map[string]bool{}
	res := resolvers{qos: render.Memo(a.peers)} // what this sync resolved, each selector once
	if a.NetPol != nil {
		res.pol = netpolicy.Memo(a.NetPol.Peers)
	}
	for _, c := range a.claims.Claims() {
		for i := range c.Devices {
			outs, todo = a.planDevice(c, &c.Devices[i], res, seen, outs, todo)
		}
	}
	fouts, ftodo := a.planForeign(res, seen)
	a.forgetUnseen(seen)
	a.removeGoneForeign(ctx, seen)
	outs = append(outs, a.apply(ctx, todo)...)
	outs = append(append(outs, fouts...), a.applyForeign(ftodo)...)
	outs = append(outs, a.syncPrimary(ctx, res.qos)...)
	a.tidy(ctx)
	slices.SortFunc(outs, func(x, y Outcome) int {
		return cmp.Or(cmp.Compare(x.Pod.String(), y.Pod.String()), cmp.Compare(x.IfName, y.IfName))
	})
	a.report(ctx, outs)
	a.mu.Lock()
	a.last = outs
	a.mu.Unlock()
	if a.Timed != nil {
		a.Timed(time.Since(start), outs)
	}
	return outs
}

// tidy runs NetPol.Tidy; a failure is logged and tried again at the next
// sync (what it tidies stays as open as it was).
func (a *Agent) tidy(ctx context.Context) {
	if a.NetPol == nil || a.NetPol.Tidy == nil {
		return
	}
	if err := a.NetPol.Tidy(); err != nil {
		klog.FromContext(ctx).Error(err, "Tidying the port guard's sets failed; tried again at the next sync")
	}
}

// resolvers resolve the selectors of one sync, each once: NetworkPolicy
// peers to endpoints, NetworkQoS destinations to addresses.
type resolvers struct {
	pol netpolicy.Peers
	qos render.Peers
}

// pending is an attachment whose plans it may not hold yet.
type pending struct {
	claim  types.UID
	key    string
	at     checkpoint.Attachment
	qos    *qos.Plan    // nil: not synced
	policy *netpol.Plan // nil: not synced
	out    Outcome
}

// qosItem is the attachment's interface for the QoS kernel.
func (p pending) qosItem() Item { return Item{PodNS: p.at.NetNS, IfName: p.at.IfName, Plan: p.qos} }

// planDevice computes the plans of the device's attached interfaces. The
// QoS of a device recorded before the agent existed (no qos), or whose
// network is no longer offered, is left as it is; the policy of every
// attachment is kept current whatever becomes of its network (a withdrawn
// network's pods still run, and a policy's revocations reach them).
func (a *Agent) planDevice(c *checkpoint.Claim, d *checkpoint.Device, res resolvers, seen map[string]bool, outs []Outcome, todo []pending) ([]Outcome, []pending) {
	net, offered := a.networkOf(d)
	for _, at := range d.Attachments {
		ref, ok := podOf(c, at.PodUID)
		if at.State != checkpoint.Attached || !ok {
			continue
		}
		pod, ok := a.pods.Pod(ref.Namespace, ref.Name, ref.UID)
		if !ok {
			continue // not in the cache yet, or being deleted: the next sync sees it
		}
		key := attachmentKey(c.UID, at)
		seen[key] = true
		p := pending{claim: c.UID, key: key, at: at, out: Outcome{Pod: types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name},
			PodUID: ref.UID, IfName: at.IfName, Network: d.Network}}
		if d.QoS != nil && offered {
			target := render.Target{Namespace: ref.Namespace, PodLabels: pod.Labels, Network: net}
			if a.NADs != nil {
				target.NAD = a.NADs.Generated(ref.Namespace, net)
			}
			if p.qos = a.plan(d, target, res.qos, &p.out); p.qos != nil && a.holds(key, p.qos) {
				p.qos = nil
			}
		}
		outs, todo = a.file(p, pod, net, res.pol, outs, todo)
	}
	return outs, todo
}

// file adds to p, its QoS planned, the policy plan to sync (unless the
// attachment holds it already), and files p under todo when it has a plan
// to sync, its outcome under outs when not.
func (a *Agent) file(p pending, pod *corev1.Pod, net network.Network, peers netpolicy.Peers, outs []Outcome, todo []pending) ([]Outcome, []pending) {
	if a.NetPol != nil {
		if p.policy = a.policyPlan(pod, net, peers, &p.out); p.policy != nil && a.holdsPolicy(p.key, p.policy) {
			p.policy = nil
		}
	}
	if p.qos == nil && p.policy == nil {
		return append(outs, p.out), todo
	}
	return outs, append(todo, p)
}

// networkOf returns the device's network as offered on the node, or, when
// it is not offered any more, as the record names it (which is all a
// policy's scoping and its peers need).
func (a *Agent) networkOf(d *checkpoint.Device) (network.Network, bool) {
	offer, ok := a.networks.Lookup(d.Device)
	if !ok || offer.Network.Ref != d.Network {
		return network.Network{Ref: d.Network}, false
	}
	return offer.Network, true
}

// policyItem is the attachment's interface for the policy kernel, with the
// MAC and addresses its ADD reported.
func policyItem(at checkpoint.Attachment, plan *netpol.Plan) podpolicy.Interface {
	if at.Result == nil {
		return podpolicy.Interface{PodNS: at.NetNS, IfName: at.IfName, Plan: plan}
	}
	return podpolicy.NewInterface(at.NetNS, at.IfName, at.Result.MAC, at.Result.IPs, plan)
}

// policyPlan computes the attachment's policy, recording in out which
// policies select it and what was left out (nil: no plan can be applied).
func (a *Agent) policyPlan(pod *corev1.Pod, net network.Network, peers netpolicy.Peers, out *Outcome) *netpol.Plan {
	in, nsLabels, err := a.policyInputs(pod.Namespace)
	if err != nil {
		out.Err = errors.Join(out.Err, err)
		return nil
	}
	var ports []corev1.ContainerPort
	for _, c := range pod.Spec.Containers {
		ports = append(ports, c.Ports...)
	}
	target := netpolicy.Target{Namespace: pod.Namespace, Labels: pod.Labels, NamespaceLabels: nsLabels, Ports: ports, Network: net, Known: a.NetPol.Known}
	plan, selected, ignored := netpolicy.CompileAll(in, target, peers)
	out.Policies, out.MultiPolicies, out.ClusterPolicies = selected.NetworkPolicies, selected.MultiNetworkPolicies, selected.ClusterNetworkPolicies
	out.PolicyIgnored = ignored
	return &plan
}

// policyInputs lists the policies that may apply to a pod of the
// namespace, and the namespace's labels when there are
// ClusterNetworkPolicies.
func (a *Agent) policyInputs(ns string) (netpolicy.Policies, map[string]string, error) {
	var in netpolicy.Policies
	var err error
	if in.NetworkPolicies, err = a.NetPol.List(ns); err != nil {
		return in, nil, fmt.Errorf("list NetworkPolicies of namespace %s: %w", ns, err)
	}
	if a.NetPol.Multi != nil {
		if in.Multi, err = a.NetPol.Multi(ns); err != nil {
			return in, nil, fmt.Errorf("list MultiNetworkPolicies of namespace %s: %w", ns, err)
		}
	}
	if a.NetPol.Cluster == nil {
		return in, nil, nil
	}
	if in.Cluster, err = a.NetPol.Cluster(); err != nil {
		return in, nil, fmt.Errorf("list ClusterNetworkPolicies: %w", err)
	}
	if len(in.Cluster) == 0 || a.NetPol.NamespaceLabels == nil {
		return in, nil, nil
	}
	labels, err := a.NetPol.NamespaceLabels(ns)
	if err != nil {
		return in, nil, fmt.Errorf("labels of namespace %s: %w", ns, err)
	}
	return in, labels, nil
}

// heldPolicy is an attachment's interface as last synced, with the policy
// plan it then got (iface.Plan), and the port that holds it (nil: in the pod).
type heldPolicy struct {
	iface podpolicy.Interface
	port  *podpolicy.Port
}

// plan is the policy plan the attachment holds (nil: unknown).
func (h heldPolicy) plan() *netpol.Plan { return h.iface.Plan }

// appliedPolicy is the policy plan the attachment holds, as last applied
// (its zero value: unknown).
func (a *Agent) appliedPolicy(key string) heldPolicy {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.appliedPol[key]
}

// holdsPolicy reports whether the attachment holds the policy plan, as
// last applied.
func (a *Agent) holdsPolicy(key string, plan *netpol.Plan) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	last, ok := a.appliedPol[key]
	return ok && last.plan().Equal(plan)
}

// plan computes the attachment's plan, recording in out what selects it
// and what went wrong (nil: no plan can be applied).
func (a *Agent) plan(d *checkpoint.Device, target render.Target, peers render.Peers, out *Outcome) *qos.Plan {
	objs, err := a.policies.NetworkQoS(target.Namespace)
	if err != nil {
		out.QoSErr = fmt.Errorf("list NetworkQoS of namespace %s: %w", target.Namespace, err)
		out.Err = out.QoSErr
		return nil
	}
	plan, selected, ignored, err := Desired(d.QoS.Base, objs, target, peers)
	out.Selected, out.Ignored = selected, ignored
	if err != nil {
		out.QoSErr = fmt.Errorf("pod %s interface %s: %w", out.Pod, out.IfName, err)
		out.Err = out.QoSErr
	}
	return plan
}

// holds reports whether the attachment holds the plan, as last applied.
func (a *Agent) holds(key string, plan *qos.Plan) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	last, ok := a.applied[key]
	return ok && reflect.DeepEqual(last.Plan, plan)
}

func (a *Agent) forgetUnseen(seen map[string]bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for key := range a.applied {
		if !seen[key] {
			delete(a.applied, key)
		}
	}
	for key := range a.appliedPol {
		if !seen[key] {
			delete(a.appliedPol, key)
		}
	}
}

func podOf(c *checkpoint.Claim, uid types.UID) (checkpoint.Pod, bool) {
	for _, p := range c.Pods {
		if p.UID == uid {
			return p, true
		}
	}
	return checkpoint.Pod{}, false
}
