// Package qosagent is netclass-dra's agent for the rules of running
// attachments: it keeps the DSCP and metered rules of every attachment of
// its node equal to what the objects say now — the NetworkQoS objects of
// the pod's namespace, the pod's own labels (each pod of a shared claim
// gets the rules its labels select) and the addresses the selected peers
// have on the network — and, when NetPol is set, their NetworkPolicy
// tables too, without restarting a pod. It is level-triggered, as
// kube-network-policies is: any change of its inputs asks for a sync, a
// sync computes the desired plans of every attachment and applies only
// the differences (plugins/qosport.SyncInterfaces: few nftables
// transactions for all the node's ports, set elements updated one by one;
// plugins/podpolicy in the pods). An attachment whose plans are the ones
// last applied costs no kernel access; after a restart the first sync
// reads the kernel and changes nothing that is already right. Attachments
// without addresses get their rules as well: nothing here needs the pod's
// own IPs.
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

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/conf/netpol"
	"github.com/netclass-dev/netclass/conf/qos"
	"github.com/netclass-dev/netclass/plugins/podpolicy"
	"github.com/netclass-dev/netclass/plugins/qosport"
	"github.com/netclass-dev/netclass/shim/attachment"
	"github.com/netclass-dev/netclass/shim/checkpoint"
	"github.com/netclass-dev/netclass/shim/netpolicy"
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

// Pods returns a pod as it is now; ok is false when the pod with that UID
// is not known (not yet seen, or gone).
type Pods interface {
	Pod(namespace, name string, uid types.UID) (pod *corev1.Pod, ok bool)
}

// NetPolicies makes the agent enforce the NetworkPolicies labelled for
// netclass on the attachments too (shim/netpolicy, plugins/podpolicy).
type NetPolicies struct {
	// List returns the namespace's NetworkPolicies (netclass's, or all:
	// the others are ignored).
	List func(namespace string) ([]*networkingv1.NetworkPolicy, error)
	// Kernel brings interfaces' policy tables to their plans.
	Kernel func([]podpolicy.Interface) []podpolicy.Result
	// Peers resolves the rules' selectors to the peers' endpoints.
	Peers netpolicy.Peers
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
	// Policies names the NetworkPolicies that select the attachment;
	// PolicyChanged says its policy table was updated, PolicyIgnored what
	// policy rules were left out (which only narrows what is allowed:
	// netpolicy.RuleErrors), PolicyErr why the table could not be written.
	Policies      []string
	PolicyChanged bool
	PolicyIgnored error
	PolicyErr     error
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
	// Observe, when set, receives the outcomes of every sync; Timed, when
	// set, its duration too (metrics).
	Observe func(context.Context, []Outcome)
	Timed   func(time.Duration, []Outcome)
	// Resync is the period of syncs without a trigger (0: 5 minutes).
	Resync time.Duration
	// NetPol, when set, adds NetworkPolicy enforcement.
	NetPol *NetPolicies
	// Debounce gathers the triggers of one burst of changes into one sync
	// (0: 250 ms).
	Debounce time.Duration
	// Quiet, when set, is waited for before each triggered sync: the node
	// daemon yields to sandboxes being attached (bounded).
	Quiet func(context.Context)

	trigger    chan struct{}
	mu         sync.Mutex
	applied    map[string]*qos.Plan    // attachment key -> the QoS plan it holds
	appliedPol map[string]*netpol.Plan // attachment key -> the policy plan it holds
	last       []Outcome               // the last sync's
}

// Outcomes returns what the last sync did, attachment by attachment (what
// applies to each: its NetworkQoS objects and NetworkPolicies).
func (a *Agent) Outcomes() []Outcome {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.last)
}

// New returns an agent over its sources.
func New(claims Claims, networks Networks, policies Policies, pods Pods, peers render.Peers, kernel Kernel) *Agent {
	return &Agent{claims: claims, networks: networks, policies: policies, pods: pods, peers: peers, kernel: kernel,
		trigger: make(chan struct{}, 1), applied: map[string]*qos.Plan{}, appliedPol: map[string]*netpol.Plan{}}
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
			a.settle(ctx)
		case <-retry:
		case <-time.After(resync):
		}
	}
}

// settle waits for the burst a trigger belongs to: Debounce (triggers in
// between coalesce), then Quiet.
func (a *Agent) settle(ctx context.Context) {
	debounce := a.Debounce
	if debounce <= 0 {
		debounce = 250 * time.Millisecond
	}
	t := time.NewTimer(debounce)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return
	case <-t.C:
	}
	select { // what arrived meanwhile is part of this sync
	case <-a.trigger:
	default:
	}
	if a.Quiet != nil {
		a.Quiet(ctx)
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
	start := time.Now()
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
	a.mu.Lock()
	a.last = outs
	a.mu.Unlock()
	if a.Timed != nil {
		a.Timed(time.Since(start), outs)
	}
	return outs
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

// planDevice computes the plans of the device's attached interfaces. The
// QoS of a device recorded before the agent existed (no qos), and both
// plans of a device whose network is no longer offered, are left as they
// are.
func (a *Agent) planDevice(c *checkpoint.Claim, d *checkpoint.Device, seen map[string]bool, outs []Outcome, todo []pending) ([]Outcome, []pending) {
	offer, ok := a.networks.Lookup(d.Device)
	if !ok || offer.Network.Ref != d.Network {
		return outs, todo
	}
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
		if d.QoS != nil {
			target := render.Target{Namespace: ref.Namespace, PodLabels: pod.Labels, Network: offer.Network}
			if p.qos = a.plan(d, target, &p.out); p.qos != nil && a.holds(key, p.qos) {
				p.qos = nil
			}
		}
		if a.NetPol != nil {
			if p.policy = a.policyPlan(pod, offer.Network, &p.out); p.policy != nil && a.holdsPolicy(key, p.policy) {
				p.policy = nil
			}
		}
		if p.qos == nil && p.policy == nil {
			outs = append(outs, p.out)
		} else {
			todo = append(todo, p)
		}
	}
	return outs, todo
}

// policyPlan computes the attachment's policy, recording in out which
// policies select it and what was left out (nil: no plan can be applied).
func (a *Agent) policyPlan(pod *corev1.Pod, net network.Network, out *Outcome) *netpol.Plan {
	pols, err := a.NetPol.List(pod.Namespace)
	if err != nil {
		out.Err = errors.Join(out.Err, fmt.Errorf("list NetworkPolicies of namespace %s: %w", pod.Namespace, err))
		return nil
	}
	var ports []corev1.ContainerPort
	for _, c := range pod.Spec.Containers {
		ports = append(ports, c.Ports...)
	}
	plan, selected, ignored := netpolicy.Compile(pols, netpolicy.Target{Namespace: pod.Namespace, Labels: pod.Labels, Ports: ports, Network: net}, a.NetPol.Peers)
	out.Policies, out.PolicyIgnored = selected, ignored
	return &plan
}

// holdsPolicy reports whether the attachment holds the policy plan, as
// last applied.
func (a *Agent) holdsPolicy(key string, plan *netpol.Plan) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	last, ok := a.appliedPol[key]
	return ok && reflect.DeepEqual(last, plan)
}

// plan computes the attachment's plan, recording in out what selects it
// and what went wrong (nil: no plan can be applied).
func (a *Agent) plan(d *checkpoint.Device, target render.Target, out *Outcome) *qos.Plan {
	objs, err := a.policies.NetworkQoS(target.Namespace)
	if err != nil {
		out.Err = fmt.Errorf("list NetworkQoS of namespace %s: %w", target.Namespace, err)
		return nil
	}
	plan, selected, ignored, err := Desired(d.QoS.Base, objs, target, a.peers)
	out.Selected, out.Ignored = selected, ignored
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
	for key := range a.appliedPol {
		if !seen[key] {
			delete(a.appliedPol, key)
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
		var live []pending
		for _, p := range todo {
			if stillAttached(now[p.claim], p.at) {
				live = append(live, p)
			}
		}
		qosRes, polRes := a.syncKernel(live)
		for i, p := range live {
			outs = append(outs, a.record(p, qosRes[i], polRes[i]))
		}
		return nil
	})
	return outs, err
}

// syncKernel syncs the QoS and policy plans of the attachments, a result
// of each per attachment (the zero Result for a plan that is not synced).
func (a *Agent) syncKernel(live []pending) (qosRes, polRes []Result) {
	qosRes, polRes = make([]Result, len(live)), make([]Result, len(live))
	var items []Item
	var polItems []podpolicy.Interface
	var at, polAt []int
	for i, p := range live {
		if p.qos != nil {
			items, at = append(items, Item{PodNS: p.at.NetNS, IfName: p.at.IfName, Plan: p.qos}), append(at, i)
		}
		if p.policy != nil {
			polItems, polAt = append(polItems, podpolicy.Interface{PodNS: p.at.NetNS, IfName: p.at.IfName, Plan: p.policy}), append(polAt, i)
		}
	}
	if len(items) > 0 {
		for j, r := range a.kernel(items) {
			qosRes[at[j]] = r
		}
	}
	if len(polItems) > 0 {
		for j, r := range a.NetPol.Kernel(polItems) {
			polRes[polAt[j]] = Result{Changed: r.Changed, Err: r.Err}
		}
	}
	return qosRes, polRes
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
func (a *Agent) record(p pending, qr, pr Result) Outcome {
	a.mu.Lock()
	defer a.mu.Unlock()
	p.out.Changed, p.out.PolicyChanged = qr.Changed, pr.Changed
	if p.qos != nil {
		if qr.Err != nil {
			delete(a.applied, p.key) // unknown now: read the kernel next time
			p.out.Err = errors.Join(p.out.Err, fmt.Errorf("pod %s interface %s: %w", p.out.Pod, p.out.IfName, qr.Err))
		} else {
			a.applied[p.key] = p.qos
		}
	}
	if p.policy != nil {
		if pr.Err != nil {
			delete(a.appliedPol, p.key)
			p.out.PolicyErr = pr.Err
			p.out.Err = errors.Join(p.out.Err, fmt.Errorf("pod %s interface %s: %w", p.out.Pod, p.out.IfName, pr.Err))
		} else {
			a.appliedPol[p.key] = p.policy
		}
	}
	return p.out
}

// report logs the outcomes and hands them to Observe.
func (a *Agent) report(ctx context.Context, outs []Outcome) {
	log := klog.FromContext(ctx)
	for _, o := range outs {
		switch {
		case o.Err != nil:
			log.Error(o.Err, "QoS rules not applied", "pod", o.Pod, "interface", o.IfName, "network", o.Network.String())
		case o.Changed || o.PolicyChanged:
			log.V(2).Info("Rules updated", "pod", o.Pod, "interface", o.IfName, "network", o.Network.String(),
				"networkQoS", o.Selected, "qosChanged", o.Changed, "networkPolicies", o.Policies, "policyChanged", o.PolicyChanged)
		}
		if o.PolicyIgnored != nil {
			log.Info("Some NetworkPolicy rules are not enforced (what they allow stays closed)", "pod", o.Pod, "network", o.Network.String(), "reason", o.PolicyIgnored.Error())
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
