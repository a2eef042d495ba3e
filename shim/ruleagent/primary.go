package ruleagent

import (
	"context"
	"errors"
	"fmt"
	"reflect"

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

	lock chan struct{} // one sync or guard at a time
	held map[string]primaryState
	// known: a sync has run since the start, so held is what the kernel
	// holds (before it, every pod is synced once: rules of objects deleted
	// while the daemon was down go).
	known bool
}

// primaryState is what a sandbox's primary interface holds.
type primaryState struct {
	hostIf string
	plan   *qos.Plan
}

// NewPrimary returns the primary network's part of the agent.
func NewPrimary(list func() []sandboxes.Sandbox, hostEnd func(string, string) (string, error), removePort func(string) error) *Primary {
	return &Primary{Sandboxes: list, HostEnd: hostEnd, RemovePort: removePort,
		lock: make(chan struct{}, 1), held: map[string]primaryState{}}
}

func (p *Primary) acquire(ctx context.Context) error {
	select {
	case p.lock <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("the primary network's rules are busy: %w", ctx.Err())
	}
}

func (p *Primary) release() { <-p.lock }

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
func (a *Agent) syncPrimary(ctx context.Context) []Outcome {
	p := a.Primary
	if p == nil {
		return nil
	}
	if err := p.acquire(ctx); err != nil {
		return nil
	}
	defer p.release()
	var outs []Outcome
	var todo []primaryPending
	live := map[string]bool{}
	for _, sb := range p.Sandboxes() {
		live[primaryKey(sb)] = true
		pod, ok := a.pods.Pod(sb.Pod.Namespace, sb.Pod.Name, sb.UID)
		if !ok {
			continue // not in the cache yet, or being deleted: the next sync sees it
		}
		pend, ok := a.primaryPlan(sb, pod)
		switch {
		case !ok:
		case pend.plan == nil || p.holds(pend.key, pend.plan):
			outs = append(outs, pend.out)
		default:
			todo = append(todo, pend)
		}
	}
	outs = append(outs, a.applyPrimary(ctx, todo)...)
	p.removeGone(ctx, live)
	if !p.known && (p.Ready == nil || p.Ready()) {
		p.known = true
		p.collect(ctx)
	}
	return outs
}

// primaryPlan computes the plan of the sandbox's primary interface; ok is
// false when nothing is to be done nor reported: no object selects the pod
// and its interface holds nothing of netclass's.
func (a *Agent) primaryPlan(sb sandboxes.Sandbox, pod *corev1.Pod) (pend primaryPending, ok bool) {
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
	plan, selected, ignored, err := Desired(nil, objs, target, a.peers)
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
	return ok && reflect.DeepEqual(st.plan, plan)
}

// applyPrimary syncs the pending primary interfaces in one kernel call and
// records what they hold. The host end of an interface that is to get
// rules is looked up first, so the rules can be removed once the pod's
// namespace is gone.
func (a *Agent) applyPrimary(ctx context.Context, todo []primaryPending) []Outcome {
	if len(todo) == 0 {
		return nil
	}
	p := a.Primary
	items := make([]Item, len(todo))
	hostIfs := make([]string, len(todo))
	for i, t := range todo {
		items[i] = Item{PodNS: t.netns, IfName: PrimaryIfName, Plan: t.plan, HostIngress: true}
		if st, ok := p.held[t.key]; ok {
			hostIfs[i] = st.hostIf
		} else if t.plan.NeedsRules() {
			hostIfs[i], _ = p.HostEnd(t.netns, PrimaryIfName) // an error is the kernel's too, reported there
		}
	}
	var outs []Outcome
	for i, r := range a.kernel(items) {
		t := todo[i]
		t.out.Changed = r.Changed
		switch {
		case errors.Is(r.Err, netns.ErrNotFound): // a stopped sandbox the runtime still lists
			delete(p.held, t.key)
			continue
		case r.Err != nil && (len(t.out.Selected) > 0 || p.isHeld(t.key)):
			t.out.QoSErr = fmt.Errorf("pod %s interface %s: %w", t.out.Pod, PrimaryIfName, r.Err)
			t.out.Err = errors.Join(t.out.Err, t.out.QoSErr)
			delete(p.held, t.key) // unknown now: read the kernel next time
		case r.Err != nil: // a pod nothing selects, synced once after the start
			klog.FromContext(ctx).V(2).Info("Primary interface not checked", "pod", t.out.Pod, "err", r.Err)
		case t.plan.NeedsRules():
			p.held[t.key] = primaryState{hostIf: hostIfs[i], plan: t.plan}
		default:
			delete(p.held, t.key)
		}
		outs = append(outs, t.out)
	}
	return outs
}

func (p *Primary) isHeld(key string) bool { _, ok := p.held[key]; return ok }

// removeGone removes the rules the sandboxes that are gone left on their
// host ends (rules in a pod's namespace went with it).
func (p *Primary) removeGone(ctx context.Context, live map[string]bool) {
	for key, st := range p.held {
		if live[key] {
			continue
		}
		if st.hostIf != "" {
			if err := p.RemovePort(st.hostIf); err != nil {
				klog.FromContext(ctx).Error(err, "Removing the rules of a gone pod's primary interface failed; retried at the next sync", "hostInterface", st.hostIf)
				continue
			}
		}
		delete(p.held, key)
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
	if err := p.acquire(ctx); err != nil {
		return err
	}
	defer p.release()
	pend, ok := a.primaryPlan(sb, pod)
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
