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
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/conf/qos"
	"github.com/netclass-dev/netclass/shim/attachment"
	"github.com/netclass-dev/netclass/shim/checkpoint"
	"github.com/netclass-dev/netclass/shim/network"
	"github.com/netclass-dev/netclass/shim/render"
)

// Claims are the node's prepared claims; Locked orders the agent's work on a
// claim with its sandboxes and its Unprepare (a rule applied to an
// attachment being deleted would outlive it).
type Claims interface {
	Claims() []*checkpoint.Claim
	Locked(ctx context.Context, uid types.UID, fn func(*checkpoint.Claim) error) error
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

// Kernel brings an attachment's rules to a plan and reports whether it
// changed anything.
type Kernel interface {
	Sync(netns, ifname string, plan *qos.Plan) (bool, error)
}

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
// returns what it did, attachment by attachment.
func (a *Agent) Sync(ctx context.Context) []Outcome {
	log := klog.FromContext(ctx)
	var outs []Outcome
	seen := map[string]bool{}
	for _, listed := range a.claims.Claims() {
		// A claim busy for long (a slow CNI call) delays its own rules only.
		claimCtx, cancel := context.WithTimeout(ctx, ClaimWait)
		err := a.claims.Locked(claimCtx, listed.UID, func(c *checkpoint.Claim) error {
			if c == nil {
				return nil
			}
			for i := range c.Devices {
				outs = append(outs, a.syncDevice(ctx, c, &c.Devices[i], seen)...)
			}
			return nil
		})
		cancel()
		if err != nil {
			log.Error(err, "QoS sync of a claim skipped", "claim", klog.KRef(listed.Namespace, listed.Name))
		}
	}
	a.mu.Lock()
	for key := range a.applied {
		if !seen[key] {
			delete(a.applied, key)
		}
	}
	a.mu.Unlock()
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
	return outs
}

// syncDevice syncs the device's attached interfaces. A device recorded
// before the agent existed (no qos), or whose network is no longer
// offered, is left as it is.
func (a *Agent) syncDevice(ctx context.Context, c *checkpoint.Claim, d *checkpoint.Device, seen map[string]bool) []Outcome {
	if d.QoS == nil {
		return nil
	}
	offer, ok := a.networks.Lookup(d.Device)
	if !ok || offer.Network.Ref != d.Network {
		return nil
	}
	var outs []Outcome
	for _, at := range d.Attachments {
		if at.State != checkpoint.Attached {
			continue
		}
		pod, ok := podOf(c, at.PodUID)
		if !ok {
			continue
		}
		key := fmt.Sprintf("%s/%s/%s", c.UID, at.SandboxID, at.IfName)
		seen[key] = true
		out := Outcome{Pod: types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}, PodUID: pod.UID,
			IfName: at.IfName, Network: d.Network}
		labels, ok := a.pods.Labels(pod.Namespace, pod.Name, pod.UID)
		if !ok {
			continue // not in the cache yet, or being deleted: the next sync sees it
		}
		a.syncOne(ctx, key, d, at, render.Target{Namespace: pod.Namespace, PodLabels: labels, Network: offer.Network}, &out)
		outs = append(outs, out)
	}
	return outs
}

func (a *Agent) syncOne(_ context.Context, key string, d *checkpoint.Device, at checkpoint.Attachment, target render.Target, out *Outcome) {
	objs, err := a.policies.NetworkQoS(target.Namespace)
	if err != nil {
		out.Err = fmt.Errorf("list NetworkQoS of namespace %s: %w", target.Namespace, err)
		return
	}
	for _, obj := range objs {
		if ok, _ := render.Selects(obj, target); ok {
			out.Selected = append(out.Selected, obj.Name)
		}
	}
	plan, ignored, err := Desired(d.QoS.Base, objs, target, a.peers)
	out.Ignored = ignored
	if err != nil {
		out.Err = err
		return
	}
	a.mu.Lock()
	last, known := a.applied[key]
	a.mu.Unlock()
	if known && reflect.DeepEqual(last, plan) {
		return
	}
	changed, err := a.kernel.Sync(at.NetNS, at.IfName, plan)
	out.Changed = changed
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		delete(a.applied, key) // unknown now: read the kernel next time
		out.Err = fmt.Errorf("pod %s interface %s: %w", out.Pod, at.IfName, err)
		return
	}
	a.applied[key] = plan
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
