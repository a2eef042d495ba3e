package nri

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/containerd/nri/pkg/api"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

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

// runPodSandbox attaches the pod to its networks within NRI's budget (ctx's
// deadline; start is the hook's entry). On any failure it rolls back the
// attachments of this sandbox and returns an error, so the runtime fails the
// sandbox and the kubelet retries with a new one.
func (p *Plugin) runPodSandbox(ctx context.Context, pod *api.PodSandbox, start time.Time) error {
	if len(p.Store.ForPod(types.UID(pod.GetUid()))) == 0 {
		return nil
	}
	defer p.inflight.start()()
	budget := p.currentBudget()
	claims, release, err := p.lockPod(ctx, types.UID(pod.GetUid())) // read again: reconciliation may have attached it
	if err != nil {
		return fmt.Errorf("netclass-dra: %w", err)
	}
	defer release()
	logger := klog.FromContext(p.logCtx).WithValues("pod", klog.KRef(pod.GetNamespace(), pod.GetName()), "sandbox", short(pod.GetId()))
	steps, failed, err := p.attach(ctx, pod, claims)
	addDone := time.Since(start)
	if err != nil {
		logger.Error(err, "Attaching the pod failed; its sandbox fails and the kubelet retries", "elapsed", addDone, "budget", budget)
	} else {
		logger.V(2).Info("Pod attached", "attachments", len(steps), "elapsed", addDone, "budget", budget)
	}
	var undo []Step
	if err != nil && failed >= 0 {
		undo = steps[:failed+1] // the runtime fails the sandbox: take everything back
	}
	p.reportAsync(pod, steps, undo, err, Timing{
		Pod: types.NamespacedName{Namespace: pod.GetNamespace(), Name: pod.GetName()}, Attachments: len(steps),
		Add: addDone, CNI: cniTime(steps), Budget: budget, Err: err,
	}, start)
	if err != nil {
		return fmt.Errorf("netclass-dra: %w", err)
	}
	return nil
}

// attach runs ADD for every planned step, checkpointing before and after. On
// failure it returns the steps and the index of the one that failed; the
// caller decides what to roll back.
func (p *Plugin) attach(ctx context.Context, pod *api.PodSandbox, claims []*checkpoint.Claim) ([]Step, int, error) {
	netns := NetNS(pod)
	steps, err := PlanAround(claims, types.UID(pod.GetUid()), p.othersIn(ctx, netns, pod.GetId(), claims))
	if err != nil {
		return nil, -1, err
	}
	if netns == "" {
		return steps, -1, fmt.Errorf("pod %s/%s has no network namespace of its own (hostNetwork?): it cannot take network claims", pod.GetNamespace(), pod.GetName())
	}
	for i := range steps {
		if err := p.addStep(ctx, pod.GetId(), netns, &steps[i]); err != nil {
			return steps, i, &StepError{Step: steps[i], Err: err}
		}
	}
	return steps, len(steps), nil
}

// cniTime is the time the steps' ADDs took.
func cniTime(steps []Step) time.Duration {
	var d time.Duration
	for _, s := range steps {
		d += s.CNI
	}
	return d
}

// addStep attaches one interface, recording in s the plugins' warnings and
// the time its ADD took.
func (p *Plugin) addStep(ctx context.Context, sandbox, netns string, s *Step) error {
	dev := s.Device()
	if a, ok := dev.Attachment(sandbox); ok && a.State == checkpoint.Attached && a.IfName == s.IfName {
		return nil // already done for this sandbox
	}
	p.epochs.attaching(sandbox)
	now := time.Now().UTC().Truncate(time.Second)
	att := checkpoint.Attachment{PodUID: s.Pod.UID, SandboxID: sandbox, NetNS: netns, IfName: s.IfName, State: checkpoint.Adding, AttachedAt: &now}
	if err := p.setAttachment(*s, att); err != nil {
		return err
	}
	cniStart := time.Now()
	res, err := p.CNI.Add(ctx, dev.ConfList, cniAttachment(s.Pod, *dev, att))
	s.CNI = time.Since(cniStart)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("it did not finish within NRI's budget (raise containerd's NRI plugin_request_timeout): %w", err)
		}
		return err
	}
	att.State = checkpoint.Attached
	att.Result = &checkpoint.Result{InterfaceName: res.InterfaceName, MAC: res.MAC, IPs: res.IPs}
	if p.Fault != nil {
		p.Fault(FaultAfterAdd)
	}
	if p.Secure != nil {
		if err := p.Secure(ctx, s.Claim, dev, s.Pod, att); err != nil {
			return fmt.Errorf("secure interface %s: %w", s.IfName, err)
		}
	}
	s.Warnings = res.Warnings
	return p.setAttachment(*s, att)
}

func (p *Plugin) setAttachment(s Step, att checkpoint.Attachment) error {
	return p.Store.Update(s.Claim.UID, func(c *checkpoint.Claim) error {
		if s.DeviceIdx >= len(c.Devices) {
			return fmt.Errorf("claim %s/%s changed under the attachment", c.Namespace, c.Name)
		}
		c.Devices[s.DeviceIdx].SetAttachment(att)
		s.Claim.Devices[s.DeviceIdx].SetAttachment(att)
		return nil
	})
}

// reportAsync, after the handler returned (outside NRI's budget), rolls back
// the undo steps, writes the claims' statuses and the pod's Events, then
// reports the timing.
func (p *Plugin) reportAsync(pod *api.PodSandbox, steps, undo []Step, err error, timing Timing, start time.Time) {
	failures := map[types.UID]map[string]error{}
	var failedPod *checkpoint.Pod
	var se *StepError
	if errors.As(err, &se) {
		failures[se.Step.Claim.UID] = map[string]error{se.Step.Device().Device: se.Err}
		failedPod = &se.Step.Pod
	}
	claims := map[types.UID]bool{}
	var pods []checkpoint.Pod
	for _, s := range steps {
		if !claims[s.Claim.UID] {
			claims[s.Claim.UID] = true
			pods = append(pods, s.Pod)
		}
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		ctx, cancel := context.WithTimeout(p.logCtx, time.Minute)
		defer cancel()
		p.rollbackHolding(ctx, pod.GetId(), NetNS(pod), undo)
		if failedPod != nil {
			p.Reporter.PodEvent(*failedPod, corev1.EventTypeWarning, "NetworkAttachFailed", se.Error())
		} else if err != nil && len(pods) > 0 {
			p.Reporter.PodEvent(pods[0], corev1.EventTypeWarning, "NetworkAttachFailed", err.Error())
		} else if err == nil {
			p.warn(steps)
		}
		statusStart := time.Now()
		for uid := range claims {
			p.statuses.Write(ctx, uid, failures[uid])
		}
		timing.Status = time.Since(statusStart)
		timing.Total = time.Since(start)
		klog.FromContext(ctx).V(2).Info("Pod's networks attached", "pod", timing.Pod, "attachments", timing.Attachments,
			"addMs", ms(timing.Add), "cniMs", ms(timing.CNI), "totalMs", ms(timing.Total), "statusMs", ms(timing.Status), "err", timing.Err)
		if p.Observer != nil {
			p.Observer(timing)
		}
	}()
}

// writeStatus writes a claim's status from its checkpoint as it is now; the
// status queue orders the calls.
func (p *Plugin) writeStatus(ctx context.Context, uid types.UID, failures map[string]error) {
	c, ok := p.Store.Get(uid)
	if !ok {
		return // unprepared meanwhile
	}
	if err := p.Reporter.Attached(ctx, c, failures); err != nil {
		klog.FromContext(ctx).Error(err, "Writing the claim's status failed", "claim", klog.KRef(c.Namespace, c.Name))
	}
}

// StepError is an attachment that failed.
type StepError struct {
	Step Step
	Err  error
}

func (e *StepError) Error() string {
	d := e.Step.Device()
	return fmt.Sprintf("attaching %s as %s (claim %s, request %s) failed: %v", d.Network, e.Step.IfName, e.Step.Claim.Name, d.Request, e.Err)
}

func (e *StepError) Unwrap() error { return e.Err }

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
