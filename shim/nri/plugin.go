package nri

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/containerd/nri/pkg/api"
	"k8s.io/apimachinery/pkg/types"

	"github.com/netclass-dev/netclass/shim/checkpoint"
	"github.com/netclass-dev/netclass/shim/cni"
)

// Store keeps the prepared claims and their attachments.
type Store interface {
	Get(uid types.UID) (*checkpoint.Claim, bool)
	ForPod(uid types.UID) []*checkpoint.Claim
	List() []*checkpoint.Claim
	Update(uid types.UID, fn func(*checkpoint.Claim) error) error
}

// CNI runs configuration lists.
type CNI interface {
	Add(ctx context.Context, confList []byte, a cni.Attachment) (cni.Result, error)
	Del(ctx context.Context, confList []byte, a cni.Attachment) error
	GC(ctx context.Context, confList []byte, valid []cni.Attachment) error
	Cached(confList []byte, a cni.Attachment) (cni.Result, bool, error)
}

// Reporter writes claim statuses and pod Events.
type Reporter interface {
	Attached(ctx context.Context, c *checkpoint.Claim, failures map[string]error) error
	PodEvent(p checkpoint.Pod, eventType, reason, message string)
}

// Timing is what one RunPodSandbox of a pod with attachments cost.
type Timing struct {
	Pod         types.NamespacedName
	Attachments int
	// Add is the time from RunPodSandbox's entry until every ADD was done
	// and checkpointed: netclass's share of the NRI budget.
	Add time.Duration
	// Total runs until the claims' statuses were written.
	Total time.Duration
	// CNI is the part of Add the ADDs themselves took (the plugins' execs
	// through libcni): the rest is netclass-dra's own (locks, checkpoint
	// writes, the interfaces' policy).
	CNI time.Duration
	// Status is the time the status writes themselves took (API calls included).
	Status time.Duration
	// Budget is NRI's request timeout in effect.
	Budget time.Duration
	Err    error
}

// Plugin handles NRI pod sandbox events.
type Plugin struct {
	Store    Store
	CNI      CNI
	Reporter Reporter
	// Observer, when set, gets the Timing of each RunPodSandbox with attachments.
	Observer func(Timing)
	// Margin is kept free of the NRI budget for the reply (default 250 ms).
	Margin time.Duration
	// OnConnect, when set, is called each time NRI configured the plugin.
	OnConnect func()
	// GCBlocked, when set, says why CNI GC must not run: GC only removes
	// what the daemon positively knows is stale, and a checkpoint record it
	// could not read may describe live attachments.
	GCBlocked string
	// RetryBase is the first wait before a failed DEL of a stopped sandbox
	// is retried (default 1 s); the wait doubles up to a minute.
	RetryBase time.Duration
	// Hooks, when set, is told about every NRI hook answered (metrics).
	Hooks HookObserver
	// Fault, when set, is called at the points where a crash would be the
	// hardest to recover from (tests inject faults there).
	Fault func(point string)
	// Secure, when set, runs after each attachment's ADD, before it counts
	// as attached and before the pod's containers start: netclass-dra
	// installs the attachment's NetworkPolicy there, so a pod a policy
	// selects is never open on the network. An error fails the attachment
	// (the sandbox fails closed and the kubelet retries).
	Secure func(ctx context.Context, c *checkpoint.Claim, dev *checkpoint.Device, pod checkpoint.Pod, att checkpoint.Attachment) error
	// SettleSecure, when set, returns once the work of the sandbox's
	// Secure calls has ended (a Secure past its deadline returns while its
	// kernel call goes on), or with ctx's error: a rollback's DELs wait for
	// it, so they remove what that work wrote rather than run before it.
	SettleSecure func(ctx context.Context, sandbox string) error
	// Sandboxes, when set, is told of every sandbox of the node, with or
	// without netclass attachments (SandboxWatcher).
	Sandboxes SandboxWatcher
	// Interfaces, when set, lists the interface names in a pod's network
	// namespace: the automatic names of its claim attachments skip those
	// other CNI callers made there first (Multus's net1…; PlanAround).
	Interfaces func(netns string) ([]string, error)
	// JoinShared, when set, records a starting pod with the claims already
	// prepared on the node for other pods that it shares (the kubelet
	// prepares a claim once per node); an error fails the sandbox.
	JoinShared func(ctx context.Context, pod types.NamespacedName, uid types.UID) error

	// locks orders sandbox handling, Unprepare and reconciliation per
	// claim (unrelated pods run in parallel); they are taken with the
	// caller's deadline, so work stuck on a claim makes a sandbox of the
	// same claim fail (and be retried) instead of overrunning NRI's budget.
	locks    *locks
	inflight *inflight
	statuses *statusQueue
	budgetMu sync.Mutex
	budget   func() time.Duration
	wg       sync.WaitGroup
	retries  sync.WaitGroup
	epochs   epochs
	gcOnce   sync.Once
	logCtx   context.Context
	started  time.Time
}

// NewPlugin returns a plugin; logCtx carries the logger for background work.
func NewPlugin(logCtx context.Context, store Store, runner CNI, reporter Reporter) *Plugin {
	p := &Plugin{Store: store, CNI: runner, Reporter: reporter, logCtx: logCtx, started: time.Now(), locks: newLocks(), inflight: newInflight()}
	p.statuses = newStatusQueue(p.writeStatus)
	return p
}

// livenessKey is a claim UID no claim has: taking its lock answers
// whether the work loop takes new work.
const livenessKey = types.UID("netclass-dra/liveness")

// FaultAfterAdd is the point between an attachment's ADD and its Secure:
// the port exists, closed, without its policy.
const FaultAfterAdd = "after-add"

// lockPod takes the locks of the claims reserved for a pod and returns the
// claims, read again under them.
func (p *Plugin) lockPod(ctx context.Context, pod types.UID) ([]*checkpoint.Claim, func(), error) {
	for {
		before := p.Store.ForPod(pod)
		release, err := p.locks.lock(ctx, claimUIDs(before)...)
		if err != nil {
			return nil, nil, err
		}
		claims := p.Store.ForPod(pod)
		if !slices.ContainsFunc(claimUIDs(claims), func(u types.UID) bool { return !slices.Contains(claimUIDs(before), u) }) {
			return claims, release, nil
		}
		release() // a claim was prepared for the pod meanwhile: take its lock too
	}
}

func claimUIDs(claims []*checkpoint.Claim) []types.UID {
	out := make([]types.UID, len(claims))
	for i, c := range claims {
		out[i] = c.UID
	}
	return out
}

// Hold keeps every claim's work out until the returned release is called
// (for callers that must keep every sandbox out, and for tests of a wedged
// loop).
func (p *Plugin) Hold() (release func()) {
	release, _ = p.locks.lockAll(context.Background())
	return release
}

// Claims lists the claims prepared on the node.
func (p *Plugin) Claims() []*checkpoint.Claim { return p.Store.List() }

// Locked runs fn holding the locks of the claims, with their records as
// they are then (a claim that is gone has none): the work of others on
// these claims (their sandboxes, their Unprepare) waits, and fn sees no
// attachment half-made.
func (p *Plugin) Locked(ctx context.Context, uids []types.UID, fn func(map[types.UID]*checkpoint.Claim) error) error {
	release, err := p.locks.lock(ctx, uids...)
	if err != nil {
		return err
	}
	defer release()
	now := make(map[types.UID]*checkpoint.Claim, len(uids))
	for _, uid := range uids {
		if c, ok := p.Store.Get(uid); ok {
			now[uid] = c
		}
	}
	return fn(now)
}

// Responsive reports whether the work loop takes new work before ctx ends:
// nothing holds every claim (work stuck on one claim does not count: it
// holds up that claim only, within its own deadline).
func (p *Plugin) Responsive(ctx context.Context) error {
	release, err := p.locks.lock(ctx, livenessKey)
	if err != nil {
		return err
	}
	release()
	return nil
}

// setBudget tells the plugin where NRI's request timeout is read from.
func (p *Plugin) setBudget(budget func() time.Duration) {
	p.budgetMu.Lock()
	defer p.budgetMu.Unlock()
	p.budget = budget
}

func (p *Plugin) currentBudget() time.Duration {
	p.budgetMu.Lock()
	defer p.budgetMu.Unlock()
	if p.budget == nil {
		return 2 * time.Second
	}
	return p.budget()
}

// Wait waits for background work (status writes, reconciliation) to finish.
func (p *Plugin) Wait() { p.wg.Wait() }

func (p *Plugin) margin() time.Duration {
	if p.Margin > 0 {
		return p.Margin
	}
	return 250 * time.Millisecond
}

// NetNS returns the path of the sandbox's network namespace ("" for host network).
func NetNS(pod *api.PodSandbox) string {
	for _, ns := range pod.GetLinux().GetNamespaces() {
		if ns.GetType() == "network" {
			return ns.GetPath()
		}
	}
	return ""
}

func podOf(c *checkpoint.Claim, uid types.UID) checkpoint.Pod {
	for _, p := range c.Pods {
		if p.UID == uid {
			return p
		}
	}
	return checkpoint.Pod{UID: uid, Namespace: c.Namespace}
}

func cniAttachment(pod checkpoint.Pod, dev checkpoint.Device, a checkpoint.Attachment) cni.Attachment {
	return cni.Attachment{
		ContainerID: a.SandboxID, NetNS: a.NetNS, IfName: a.IfName,
		PodNamespace: pod.Namespace, PodName: pod.Name, PodUID: string(pod.UID),
		MAC: dev.MAC, IPs: dev.IPs, DeviceID: dev.DeviceID,
	}
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// ms is a duration in milliseconds, for the timing log line benchmarks read.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
