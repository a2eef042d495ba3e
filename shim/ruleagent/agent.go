// Package ruleagent is netclass-dra's agent for the rules of running
// attachments: it keeps the DSCP and metered rules of every attachment of
// its node equal to what the objects say now — the NetworkQoS objects of
// the pod's namespace, the pod's own labels (each pod of a shared claim
// gets the rules its labels select) and the addresses the selected peers
// have on the network — and, when NetPol is set, their NetworkPolicy
// tables too (the labelled NetworkPolicies of the pod's namespace, and the
// MultiNetworkPolicies whose policy-for names the attachment's network), without restarting a pod. It is level-triggered, as
// kube-network-policies is: any change of its inputs asks for a sync, a
// sync computes the desired plans of every attachment and applies only
// the differences (plugins/qosport.SyncInterfaces: few nftables
// transactions for all the node's ports, set elements updated one by one;
// plugins/podpolicy in the pods). An attachment whose plans are the ones
// last applied costs no kernel access; after a restart the first sync
// reads the kernel and changes nothing that is already right. Attachments
// without addresses get their rules as well: nothing here needs the pod's
// own IPs.
package ruleagent

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	mnpv1beta1 "github.com/k8snetworkplumbingwg/multi-networkpolicy/pkg/apis/k8s.cni.cncf.io/v1beta1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
	cnpv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
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
	// Check, when set, verifies that an interface holds its plan
	// (podpolicy.Check): Audit uses it.
	Check func(podpolicy.Interface) error
	// Peers resolves the rules' selectors to the peers' endpoints.
	Peers netpolicy.Peers
	// Known, when set, says whether an entry of a policy's scoping
	// annotation names a network (netpolicy.Target.Known).
	Known func(entry string) bool
	// Multi, when set, returns the namespace's MultiNetworkPolicies: those
	// whose policy-for names an attachment's network apply to it, with the
	// NetworkPolicies (netpolicy.CompileAll).
	Multi func(namespace string) ([]*mnpv1beta1.MultiNetworkPolicy, error)
	// Cluster, when set, returns the ClusterNetworkPolicies (those labelled
	// for netclass whose subject selects a pod apply to all its
	// attachments); NamespaceLabels, then needed, a namespace's labels.
	Cluster         func() ([]*cnpv1beta1.ClusterNetworkPolicy, error)
	NamespaceLabels func(namespace string) (map[string]string, error)
	// Tidy, when set, runs after each sync: what opening ports left for
	// later (podpolicy.TidyGuard), off the pods' starts.
	Tidy func() error
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
	// NAD is the NetworkAttachmentDefinition of a foreign attachment (one
	// Multus made; zero for a claim's): its network is the NAD's.
	NAD types.NamespacedName
	// Selected names the NetworkQoS objects whose rules the attachment gets.
	Selected []string
	// Changed: the kernel was updated; otherwise it already held the plan.
	Changed bool
	// Ignored lists rules left out (an unresolvable selector...).
	Ignored error
	// Policies names the NetworkPolicies that select the attachment,
	// MultiPolicies the MultiNetworkPolicies;
	// PolicyChanged says its policy table was updated, PolicyIgnored what
	// policy rules were left out (which only narrows what is allowed:
	// netpolicy.RuleErrors), PolicyErr why the table could not be written.
	// ClusterPolicies the ClusterNetworkPolicies, in precedence order;
	Policies        []string
	MultiPolicies   []string
	ClusterPolicies []string
	PolicyChanged   bool
	PolicyIgnored   error
	PolicyErr       error
	// QoSErr: the attachment's QoS rules could not be brought to their
	// plan; Err joins it with PolicyErr and what else failed.
	QoSErr error
	Err    error
	// Unnamed: a foreign attachment whose network the pod's network-status
	// no longer (or does not yet) tells (ForeignAttachment.Unnamed). Nothing
	// was synced; the outcome is its last one's, naming what it still
	// holds (no network and nothing selected if it never held a plan).
	Unnamed bool
	// NotMultus: an Unnamed one that waits for no network-status
	// (ForeignAttachment.NotMultus).
	NotMultus bool

	key string // a foreign attachment's, to find its last outcome
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
	// AuditPeriod is how often Audit checks each attachment's policy and
	// QoS rules (0: DefaultAuditPeriod).
	AuditPeriod time.Duration
	// CheckQoS, when set, verifies that an interface holds its QoS plan's
	// rules (qosport.CheckInterface): Audit uses it.
	CheckQoS func(Item) error
	// NetPol, when set, adds NetworkPolicy enforcement.
	NetPol *NetPolicies
	// Primary, when set, adds NetworkQoS on the pods' primary interface
	// (the default network).
	Primary *Primary
	// Foreign, when set, adds the attachments netclass plugins made for
	// Multus (NetworkAttachmentDefinitions), named by their NAD.
	Foreign *Foreign
	// NADs, when set, describes NetworkAttachmentDefinitions for NetworkQoS
	// NAD selectors: a foreign attachment's NAD, and the NAD
	// netclass-controller generated for a claim attachment's network.
	NADs NADs
	// Debounce is the least time between the starts of two triggered
	// syncs (0: DefaultDebounce): a trigger after a quiet spell syncs at once, the
	// triggers of a burst gather into the next sync (kube-proxy's
	// BoundedFrequencyRunner has the same shape).
	Debounce time.Duration
	// Quiet, when set, is waited for before each triggered sync: the node
	// daemon yields to sandboxes being attached (bounded).
	Quiet func(context.Context)

	trigger    chan struct{}
	mu         sync.Mutex
	guards     map[string][]chan struct{} // sandbox -> its Guards' kernel calls running (closed when they end)
	applied    map[string]Item            // attachment key -> the interface as synced, with the QoS plan it holds
	appliedPol map[string]heldPolicy      // attachment key -> the policy plan it holds
	logged     map[string]string          // the problems the last sync logged
	last       []Outcome                  // the last sync's
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
		trigger: make(chan struct{}, 1), applied: map[string]Item{}, appliedPol: map[string]heldPolicy{}}
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
		started := time.Now()
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
			a.settle(ctx, started)
		case <-retry:
		case <-time.After(resync):
		}
	}
}

// settle waits until Debounce has passed since the last sync started
// (at once when it has: an edit after a quiet spell costs no wait), then
// for Quiet; the triggers arriving meanwhile are part of the coming sync.
func (a *Agent) settle(ctx context.Context, lastStart time.Time) {
	if wait := syncDelay(lastStart, time.Now(), a.Debounce); wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
	select { // what arrived meanwhile is part of this sync
	case <-a.trigger:
	default:
	}
	if a.Quiet != nil {
		a.Quiet(ctx)
	}
}

// DefaultDebounce is Agent.Debounce when it is 0.
const DefaultDebounce = 250 * time.Millisecond

// syncDelay is how long a trigger at now waits when the last sync started
// at lastStart: until debounce (0: DefaultDebounce) has passed since then.
func syncDelay(lastStart, now time.Time, debounce time.Duration) time.Duration {
	if debounce <= 0 {
		debounce = DefaultDebounce
	}
	return max(lastStart.Add(debounce).Sub(now), 0)
}

func failed(outs []Outcome) bool {
	for _, o := range outs {
		if o.Err != nil {
			return true
		}
	}
	return false
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
