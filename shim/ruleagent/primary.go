package ruleagent

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/netclass-dev/netclass/conf/qos"
	"github.com/netclass-dev/netclass/plugins/kernel/netns"
	"github.com/netclass-dev/netclass/shim/network"
	"github.com/netclass-dev/netclass/shim/render"
	"github.com/netclass-dev/netclass/shim/sandboxes"
)

// PrimaryIfName is the pods' primary interface: the name the kubelet gives
// the primary CNI for every pod.
const PrimaryIfName = "eth0"

// Primary makes the agent enforce the NetworkQoS objects that select the
// default network on the pods' primary interface (eth0), next to whatever
// primary CNI set it up, through the same kernel as the attachments
// (qosport.SyncInterfaces: at the host end of a veth, bridged or routed,
// out of the pod's reach; in the pod at the interface's egress for any
// other interface, or when the CNI hooks a routed host end's ingress in
// tc). Only netclass's own objects are
// made and removed: the primary CNI's qdiscs, filters and tables are never
// touched. A pod no such object selects costs nothing: no kernel access,
// no state. Build it with NewPrimary.
type Primary struct {
	// Sandboxes lists the node's pod sandboxes (shim/sandboxes).
	Sandboxes func() []sandboxes.Sandbox
	// HostEnd returns the host end of a pod's interface, "" without one
	// (qosport.HostEnd): the agent keeps it to remove the rules of a pod
	// whose namespace is gone.
	HostEnd func(podNS, ifname string) (string, error)
	// RemovePort deletes the rules a gone pod left on its host end
	// (qosport.RemovePortRules).
	RemovePort func(hostIf string) error
	// Ready, when set, says whether Sandboxes lists every pod of the node
	// yet (NRI's Synchronize came): the sync that checks every pod once
	// waits for it.
	Ready func() bool
	// GC, when set, removes the rules of host ends that no longer exist
	// (pods deleted while the daemon was down) and names them: run once,
	// with the first sync that checks every pod (qosport.RemoveStaleHostRules).
	GC func() ([]string, error)

	// mu guards held and known; never held across a kernel call, so a
	// sandbox's guard never waits for a sync's kernel work.
	mu   sync.Mutex
	held map[string]primaryState
	// known: a sync has run since the start, so held is what the kernel
	// holds (before it, every pod is synced once: rules of objects deleted
	// while the daemon was down go).
	known bool
}

// primaryState is what a sandbox's primary interface holds, and where:
// its pod's namespace, its host end. An audit that found its rules
// changed marks it unknown: the next sync syncs it whatever its plan.
type primaryState struct {
	netns, hostIf string
	plan          *qos.Plan
	unknown       bool
}

// NewPrimary returns the primary network's part of the agent.
func NewPrimary(list func() []sandboxes.Sandbox, hostEnd func(string, string) (string, error), removePort func(string) error) *Primary {
	return &Primary{Sandboxes: list, HostEnd: hostEnd, RemovePort: removePort, held: map[string]primaryState{}}
}

func primaryKey(sb sandboxes.Sandbox) string { return string(sb.UID) + "/" + sb.ID }

// primaryPending is a sandbox whose primary interface may not hold its plan.
type primaryPending struct {
	key, netns string
	plan       *qos.Plan
	out        Outcome
}

// syncPrimary brings the primary interface of every pod of the node to
// the plan of the NetworkQoS objects that select it on the default
// network, and removes the rules of the pods that are gone.
func (a *Agent) syncPrimary(ctx context.Context, peers render.Peers) []Outcome {
	p := a.Primary
	if p == nil {
		return nil
	}
	p.mu.Lock()
	outs, todo := a.planPrimary(peers)
	p.mu.Unlock()
	outs = append(outs, a.applyPrimary(ctx, todo)...)
	p.mu.Lock()
	gone := p.takeGone()
	first := !p.known && (p.Ready == nil || p.Ready())
	p.known = p.known || first
	p.mu.Unlock()
	p.removeGone(ctx, gone)
	if first {
		p.collect(ctx)
	}
	return outs
}

// planPrimary computes the plans of the recorded sandboxes: the outcomes
// of those that hold theirs, and the ones to sync. Holding p.mu.
func (a *Agent) planPrimary(peers render.Peers) (outs []Outcome, todo []primaryPending) {
	p := a.Primary
	for _, sb := range p.Sandboxes() {
		pod, ok := a.pods.Pod(sb.Pod.Namespace, sb.Pod.Name, sb.UID)
		if !ok {
			continue // not in the cache yet, or being deleted: the next sync sees it
		}
		pend, ok := a.primaryPlan(sb, pod, peers)
		switch {
		case !ok:
		case pend.plan == nil || p.holds(pend.key, pend.plan):
			outs = append(outs, pend.out)
		default:
			todo = append(todo, pend)
		}
	}
	return outs, todo
}

// primaryPlan computes the plan of the sandbox's primary interface; ok is
// false when nothing is to be done nor reported: no object selects the pod
// and its interface holds nothing of netclass's.
func (a *Agent) primaryPlan(sb sandboxes.Sandbox, pod *corev1.Pod, peers render.Peers) (pend primaryPending, ok bool) {
	p := a.Primary
	key := primaryKey(sb)
	_, held := p.held[key]
	pend = primaryPending{key: key, netns: sb.NetNS, out: Outcome{Pod: sb.Pod, PodUID: sb.UID, IfName: PrimaryIfName, Network: network.Default().Ref}}
	objs, err := a.policies.NetworkQoS(sb.Pod.Namespace)
	if err != nil {
		pend.out.QoSErr = fmt.Errorf("list NetworkQoS of namespace %s: %w", sb.Pod.Namespace, err)
		pend.out.Err = pend.out.QoSErr
		return pend, true
	}
	if len(objs) == 0 && !held && p.known {
		return pend, false
	}
	target := render.Target{Namespace: sb.Pod.Namespace, PodLabels: pod.Labels, Network: network.Default()}
	plan, selected, ignored, err := Desired(nil, objs, target, peers)
	if len(selected) == 0 && !held && p.known {
		return pend, false
	}
	pend.plan, pend.out.Selected, pend.out.Ignored = plan, selected, ignored
	if err != nil {
		pend.out.QoSErr = fmt.Errorf("pod %s interface %s: %w", sb.Pod, PrimaryIfName, err)
		pend.out.Err = pend.out.QoSErr
	}
	return pend, true
}

// holds reports whether the sandbox's primary interface holds the plan.
func (p *Primary) holds(key string, plan *qos.Plan) bool {
	st, ok := p.held[key]
	return ok && !st.unknown && reflect.DeepEqual(st.plan, plan)
}

// applyPrimary syncs the pending primary interfaces in one kernel call,
// outside p.mu, and records what they hold. The host end of an interface
// that is to get rules is looked up first, so the rules can be removed
// once the pod's namespace is gone.
func (a *Agent) applyPrimary(ctx context.Context, todo []primaryPending) []Outcome {
	if len(todo) == 0 {
		return nil
	}
	p := a.Primary
	items := make([]Item, len(todo))
	hostIfs := make([]string, len(todo))
	for i, t := range todo {
		items[i] = Item{PodNS: t.netns, IfName: PrimaryIfName, Plan: t.plan, HostIngress: true}
		p.mu.Lock()
		st, ok := p.held[t.key]
		p.mu.Unlock()
		if ok {
			hostIfs[i] = st.hostIf
		} else if t.plan.NeedsRules() {
			hostIfs[i], _ = p.HostEnd(t.netns, PrimaryIfName) // an error is the kernel's too, reported there
		}
	}
	res := a.kernel(items)
	p.mu.Lock()
	defer p.mu.Unlock()
	var outs []Outcome
	for i, r := range res {
		if out, ok := p.record(ctx, todo[i], hostIfs[i], r); ok {
			outs = append(outs, out)
		}
	}
	return outs
}

// record keeps what the kernel did with one interface and returns its
// outcome (none for a sandbox whose namespace is gone). Holding p.mu.
func (p *Primary) record(ctx context.Context, t primaryPending, hostIf string, r Result) (Outcome, bool) {
	t.out.Changed = r.Changed
	_, held := p.held[t.key]
	switch {
	case errors.Is(r.Err, netns.ErrNotFound): // a stopped sandbox the runtime still lists
		delete(p.held, t.key)
		return Outcome{}, false
	case r.Err != nil && (len(t.out.Selected) > 0 || held):
		t.out.QoSErr = fmt.Errorf("pod %s interface %s: %w", t.out.Pod, PrimaryIfName, r.Err)
		t.out.Err = errors.Join(t.out.Err, t.out.QoSErr)
		delete(p.held, t.key) // unknown now: read the kernel next time
	case r.Err != nil: // a pod nothing selects, synced once after the start
		klog.FromContext(ctx).V(2).Info("Primary interface not checked", "pod", t.out.Pod, "err", r.Err)
	case t.plan.NeedsRules():
		p.held[t.key] = primaryState{netns: t.netns, hostIf: hostIf, plan: t.plan}
	default:
		delete(p.held, t.key)
	}
	return t.out, true
}

// goneState is a sandbox that left the record and what it held.
type goneState struct {
	key string
	primaryState
}

// takeGone forgets the sandboxes no longer in the record (read now, so a
// sandbox recorded during the sync is not taken for gone) and returns
// them. Holding p.mu.
func (p *Primary) takeGone() []goneState {
	live := map[string]bool{}
	for _, sb := range p.Sandboxes() {
		live[primaryKey(sb)] = true
	}
	var gone []goneState
	for key, st := range p.held {
		if !live[key] {
			gone = append(gone, goneState{key, st})
			delete(p.held, key)
		}
	}
	return gone
}

// removeGone removes the rules the gone sandboxes left on their host ends
// (rules in a pod's namespace went with it); one that fails is kept, to be
// tried again at the next sync.
func (p *Primary) removeGone(ctx context.Context, gone []goneState) {
	for _, g := range gone {
		if g.hostIf == "" {
			continue
		}
		if err := p.RemovePort(g.hostIf); err != nil {
			klog.FromContext(ctx).Error(err, "Removing the rules of a gone pod's primary interface failed; retried at the next sync", "hostInterface", g.hostIf)
			p.mu.Lock()
			if _, ok := p.held[g.key]; !ok {
				p.held[g.key] = g.primaryState
			}
			p.mu.Unlock()
		}
	}
}

// collect runs GC, logging what it removed.
func (p *Primary) collect(ctx context.Context) {
	if p.GC == nil {
		return
	}
	stale, err := p.GC()
	if len(stale) > 0 {
		klog.FromContext(ctx).Info("Removed the rules of host ends that are gone", "hostInterfaces", stale)
	}
	if err != nil {
		klog.FromContext(ctx).Error(err, "Looking for the rules of host ends that are gone failed")
	}
}

// GuardPrimary gives a new sandbox's primary interface the rules of the
// NetworkQoS objects that select the pod on the default network, before
// its containers start: the NRI hook calls it in RunPodSandbox, after the
// primary CNI's ADD. A pod nothing selects costs a lookup in the caches.
// pod is the pod as the API has it now.
func (a *Agent) GuardPrimary(ctx context.Context, sb sandboxes.Sandbox, pod *corev1.Pod) error {
	p := a.Primary
	if p == nil || sb.NetNS == "" {
		return nil
	}
	p.mu.Lock()
	pend, ok := a.primaryPlan(sb, pod, a.peers)
	p.mu.Unlock()
	if !ok || pend.plan == nil || !pend.plan.NeedsRules() {
		return pend.out.Err
	}
	outs := a.applyPrimary(ctx, []primaryPending{pend})
	if len(outs) == 0 {
		return nil // the namespace is gone
	}
	out := outs[0]
	if out.Err == nil {
		klog.FromContext(ctx).V(2).Info("NetworkQoS in place on the primary interface before the pod starts",
			"pod", klog.KObj(pod), "interface", PrimaryIfName, "networkQoS", out.Selected)
	}
	return out.Err
}

// audited lists the primary interfaces holding rules, as Items to check.
func (p *Primary) audited() map[string]Item {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]Item, len(p.held))
	for key, st := range p.held {
		if !st.unknown {
			out[key] = Item{PodNS: st.netns, IfName: PrimaryIfName, Plan: st.plan, HostIngress: true}
		}
	}
	return out
}

// forget marks what the sandbox's primary interface holds unknown, if it
// still holds plan (the record stays: the rules on its host end go with
// the pod).
func (p *Primary) forget(key string, plan *qos.Plan) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	st, ok := p.held[key]
	if !ok || st.unknown || st.plan != plan {
		return false
	}
	st.unknown = true
	p.held[key] = st
	return true
}
