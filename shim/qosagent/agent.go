// Package qosagent is netclass-dra's QoS agent: it keeps the DSCP and
// metered rules of every running attachment of its node equal to what the
// objects say now — the NetworkQoS objects of the pod's namespace, the
// pod's own labels (each pod of a shared claim gets the rules its labels
// select) and the addresses the selected peers have on the network —
// without restarting a pod. It is level-triggered, as kube-network-policies
// is: any change of its inputs asks for a sync, a sync computes the desired
// plan of every attachment and applies only the differences
// (plugins/qosport.SyncRules: one nftables transaction per attachment, set
// elements updated one by one). An attachment whose plan is the one last
// applied costs no kernel access; after a restart the first sync reads the
// kernel and changes nothing that is already right. Attachments without
// addresses get their rules as well: nothing here needs the pod's own IPs.
package qosagent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/conf/qos"
	"github.com/netclass-dev/netclass/plugins/qosport"
	"github.com/netclass-dev/netclass/shim/attachment"
	"github.com/netclass-dev/netclass/shim/checkpoint"
	"github.com/netclass-dev/netclass/shim/network"
	"github.com/netclass-dev/netclass/shim/render"
)

// Claims are the node's prepared claims; Locked orders the agent's work on
// claims with their sandboxes and their Unprepare (a rule applied to an
// attachment being deleted would outlive it): fn runs holding the locks of
// all the claims, with their records as they are then (a missing claim is
// gone).
type Claims interface {
	Claims() []*checkpoint.Claim
	Locked(ctx context.Context, uids []types.UID, fn func(map[types.UID]*checkpoint.Claim) error) error
}

// Networks resolves a published device to its network (labels, kind).
type Networks interface {
	Lookup(device string) (network.Offer, bool)
}

// Policies lists the NetworkQoS objects of a namespace.
type Policies interface {
	NetworkQoS(namespace string) ([]*ncv1.NetworkQoS, error)
}

// Pods returns a pod's current labels; ok is false when the pod with that
// UID is not known (not yet seen, or gone).
type Pods interface {
	Labels(namespace, name string, uid types.UID) (labels map[string]string, ok bool)
}

// Item is one attachment's interface and the plan it is to hold.
type Item = qosport.Interface

// Result is what the kernel side did with one Item.
type Result = qosport.Result

// Kernel brings interfaces' rules to their plans, all in one go where it
// can, and returns a result per item, in order: qosport.SyncInterfaces, or
// a fake in tests.
type Kernel func(items []Item) []Result

// Outcome is what a sync did for one attachment.
type Outcome struct {
	Pod     types.NamespacedName
	PodUID  types.UID
	IfName  string
	Network attachment.NetworkRef
	// Selected names the NetworkQoS objects whose rules the attachment gets.
	Selected []string
	// Changed: the kernel was updated; otherwise it already held the plan.
	Changed bool
	// Ignored lists rules left out (an unresolvable selector...).
	Ignored error
	// Err: the attachment's rules could not be brought to the plan.
	Err error
}

// ClaimWait bounds a sync's wait for a claim another worker holds.
const ClaimWait = 10 * time.Second

// Agent keeps the rules current. Build it with New.
type Agent struct {
	claims   Claims
	networks Networks
	policies Policies
	pods     Pods
	peers    render.Peers
	kernel   Kernel
	// Observe, when set, receives the outcomes of every sync.
	Observe func(context.Context, []Outcome)
	// Resync is the period of syncs without a trigger (0: 5 minutes).
	Resync time.Duration

	trigger chan struct{}
	mu      sync.Mutex
	applied map[string]*qos.Plan // attachment key -> the plan it holds
}

// New returns an agent over its sources.
func New(claims Claims, networks Networks, policies Policies, pods Pods, peers render.Peers, kernel Kernel) *Agent {
	return &Agent{claims: claims, networks: networks, policies: policies, pods: pods, peers: peers, kernel: kernel,
		trigger: make(chan struct{}, 1), applied: map[string]*qos.Plan{}}
}

// Trigger asks for a sync; triggers that arrive during one coalesce into the
// next.
func (a *Agent) Trigger() {
	select {
	case a.trigger <- struct{}{}:
	default:
	}
}

// Run syncs at once, then at every trigger and every Resync, and retries a
// failed sync with a backoff (1 s doubling up to Resync), until ctx ends.
func (a *Agent) Run(ctx context.Context) {
	resync := a.Resync
	if resync <= 0 {
		resync = 5 * time.Minute
	}
	backoff := time.Second
	for {
		var retry <-chan time.Time
		if failed(a.Sync(ctx)) {
			retry = time.After(backoff)
			backoff = min(2*backoff, resync)
		} else {
			backoff = time.Second
		}
		select {
		case <-ctx.Done():
			return
		case <-a.trigger:
		case <-retry:
		case <-time.After(resync):
		}
	}
}

func failed(outs []Outcome) bool {
	for _, o := range outs {
		if o.Err != nil {
			return true
		}
	}
	return false
}

// Sync brings every running attachment of the node to its desired plan and
// returns what it did, attachment by attachment. The plans are computed
// from a snapshot of the checkpoint; the attachments whose plan differs
// from the one they hold are then synced in one batch (one nftables
// transaction for the node's ports), holding their claims' locks, each
// checked against its claim's current record first.
func (a *Agent) Sync(ctx context.Context) []Outcome {
	var outs []Outcome
	var todo []pending
	seen := map[string]bool{}
	for _, c := range a.claims.Claims() {
		for i := range c.Devices {
			outs, todo = a.planDevice(c, &c.Devices[i], seen, outs, todo)
		}
	}
	a.forgetUnseen(seen)
	outs = append(outs, a.apply(ctx, todo)...)
	slices.SortFunc(outs, func(x, y Outcome) int {
		return cmp.Or(cmp.Compare(x.Pod.String(), y.Pod.String()), cmp.Compare(x.IfName, y.IfName))
	})
	a.report(ctx, outs)
	return outs
}

// pending is an attachment whose plan it may not hold yet.
type pending struct {
	claim types.UID
	key   string
	at    checkpoint.Attachment
	plan  *qos.Plan
	out   Outcome
}

// planDevice computes the plans of the device's attached interfaces. A
// device recorded before the agent existed (no qos), or whose network is
// no longer offered, is left as it is.
func (a *Agent) planDevice(c *checkpoint.Claim, d *checkpoint.Device, seen map[string]bool, outs []Outcome, todo []pending) ([]Outcome, []pending) {
	if d.QoS == nil {
		return outs, todo
	}
	offer, ok := a.networks.Lookup(d.Device)
	if !ok || offer.Network.Ref != d.Network {
		return outs, todo
	}
	for _, at := range d.Attachments {
		pod, ok := podOf(c, at.PodUID)
		if at.State != checkpoint.Attached || !ok {
			continue
		}
		labels, ok := a.pods.Labels(pod.Namespace, pod.Name, pod.UID)
		if !ok {
			continue // not in the cache yet, or being deleted: the next sync sees it
		}
		key := fmt.Sprintf("%s/%s/%s", c.UID, at.SandboxID, at.IfName)
		seen[key] = true
		out := Outcome{Pod: types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}, PodUID: pod.UID,
			IfName: at.IfName, Network: d.Network}
		plan := a.plan(d, render.Target{Namespace: pod.Namespace, PodLabels: labels, Network: offer.Network}, &out)
		switch {
		case plan == nil:
			outs = append(outs, out)
		case a.holds(key, plan):
			outs = append(outs, out)
		default:
			todo = append(todo, pending{claim: c.UID, key: key, at: at, plan: plan, out: out})
		}
	}
	return outs, todo
}

// plan computes the attachment's plan, recording in out what selects it
// and what went wrong (nil: no plan can be applied).
func (a *Agent) plan(d *checkpoint.Device, target render.Target, out *Outcome) *qos.Plan {
	objs, err := a.policies.NetworkQoS(target.Namespace)
	if err != nil {
		out.Err = fmt.Errorf("list NetworkQoS of namespace %s: %w", target.Namespace, err)
		return nil
	}
	for _, obj := range objs {
		if ok, _ := render.Selects(obj, target); ok {
			out.Selected = append(out.Selected, obj.Name)
		}
	}
	plan, ignored, err := Desired(d.QoS.Base, objs, target, a.peers)
	out.Ignored = ignored
	if err != nil {
		out.Err = fmt.Errorf("pod %s interface %s: %w", out.Pod, out.IfName, err)
	}
	return plan
}

// holds reports whether the attachment holds the plan, as last applied.
func (a *Agent) holds(key string, plan *qos.Plan) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	last, ok := a.applied[key]
	return ok && reflect.DeepEqual(last, plan)
}

func (a *Agent) forgetUnseen(seen map[string]bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for key := range a.applied {
		if !seen[key] {
			delete(a.applied, key)
		}
	}
}

// apply syncs the pending attachments holding their claims' locks, all at
// once; when that wait is too long (a claim busy with a slow CNI call),
// claim by claim, so a busy claim delays only its own rules.
func (a *Agent) apply(ctx context.Context, todo []pending) []Outcome {
	if len(todo) == 0 {
		return nil
	}
	var uids []types.UID
	for _, p := range todo {
		uids = append(uids, p.claim)
	}
	if outs, err := a.applyLocked(ctx, uids, todo); err == nil {
		return outs
	}
	var outs []Outcome
	for _, uid := range slices.Compact(slices.Sorted(slices.Values(uids))) {
		mine := slices.DeleteFunc(slices.Clone(todo), func(p pending) bool { return p.claim != uid })
		got, err := a.applyLocked(ctx, []types.UID{uid}, mine)
		if err != nil {
			for _, p := range mine {
				p.out.Err = fmt.Errorf("pod %s interface %s: claim busy: %w", p.out.Pod, p.out.IfName, err)
				got = append(got, p.out)
			}
		}
		outs = append(outs, got...)
	}
	return outs
}

func (a *Agent) applyLocked(ctx context.Context, uids []types.UID, todo []pending) ([]Outcome, error) {
	ctx, cancel := context.WithTimeout(ctx, ClaimWait)
	defer cancel()
	var outs []Outcome
	err := a.claims.Locked(ctx, uids, func(now map[types.UID]*checkpoint.Claim) error {
		var items []Item
		var live []pending
		for _, p := range todo {
			if stillAttached(now[p.claim], p.at) {
				items = append(items, Item{PodNS: p.at.NetNS, IfName: p.at.IfName, Plan: p.plan})
				live = append(live, p)
			}
		}
		for i, r := range a.kernel(items) {
			outs = append(outs, a.record(live[i], r))
		}
		return nil
	})
	return outs, err
}

// stillAttached reports whether the claim's record still holds the
// attachment (the same sandbox's interface, attached).
func stillAttached(c *checkpoint.Claim, at checkpoint.Attachment) bool {
	if c == nil {
		return false
	}
	for _, d := range c.Devices {
		for _, cur := range d.Attachments {
			if cur.SandboxID == at.SandboxID && cur.IfName == at.IfName && cur.NetNS == at.NetNS {
				return cur.State == checkpoint.Attached
			}
		}
	}
	return false
}

// record keeps what the kernel now holds and returns the outcome.
func (a *Agent) record(p pending, r Result) Outcome {
	a.mu.Lock()
	defer a.mu.Unlock()
	p.out.Changed = r.Changed
	if r.Err != nil {
		delete(a.applied, p.key) // unknown now: read the kernel next time
		p.out.Err = fmt.Errorf("pod %s interface %s: %w", p.out.Pod, p.out.IfName, r.Err)
		return p.out
	}
	a.applied[p.key] = p.plan
	return p.out
}

// report logs the outcomes and hands them to Observe.
func (a *Agent) report(ctx context.Context, outs []Outcome) {
	log := klog.FromContext(ctx)
	for _, o := range outs {
		switch {
		case o.Err != nil:
			log.Error(o.Err, "QoS rules not applied", "pod", o.Pod, "interface", o.IfName, "network", o.Network.String())
		case o.Changed:
			log.V(2).Info("QoS rules updated", "pod", o.Pod, "interface", o.IfName, "network", o.Network.String(), "networkQoS", o.Selected)
		}
		if o.Ignored != nil {
			log.Info("Some NetworkQoS rules are not applied", "pod", o.Pod, "network", o.Network.String(), "reason", o.Ignored.Error())
		}
	}
	if a.Observe != nil {
		a.Observe(ctx, outs)
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

// Errors joins the outcomes' errors (nil: every attachment holds its plan).
func Errors(outs []Outcome) error {
	var errs []error
	for _, o := range outs {
		if o.Err != nil {
			errs = append(errs, o.Err)
		}
	}
	return errors.Join(errs...)
}
