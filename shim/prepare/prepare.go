// Package prepare is netclass-dra's DRA kubelet plugin: Prepare resolves each
// allocated device of the driver to its network, applies the request's opaque
// AttachmentConfig and the NetworkQoS selecting the pod, renders the CNI
// configuration list and checkpoints it; Unprepare removes what is left.
// Both are idempotent, and one claim's failure never fails the others.
package prepare

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"

	"github.com/netclass-dev/netclass/api/contract"
	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/conf/qos"
	"github.com/netclass-dev/netclass/shim/checkpoint"
	"github.com/netclass-dev/netclass/shim/network"
	"github.com/netclass-dev/netclass/shim/render"
)

// Networks resolves a published device name to its network (and VF).
type Networks interface {
	Lookup(device string) (network.Offer, bool)
}

// Store keeps prepared claims. Update is the store's atomic read-modify-write:
// every change to an existing record goes through it, so a change made
// meanwhile by the sandbox path (an attachment recorded) is never lost.
type Store interface {
	Get(uid types.UID) (*checkpoint.Claim, bool)
	Put(c *checkpoint.Claim) error
	Update(uid types.UID, fn func(*checkpoint.Claim) error) error
	Delete(uid types.UID) error
	// Prepared finds the records of a claim by name, cheaply.
	Prepared(namespace, name string) []types.UID
}

// Pods reads a consumer pod of a claim.
type Pods interface {
	Pod(ctx context.Context, namespace, name string) (*corev1.Pod, error)
}

// QoSPolicies lists the NetworkQoS objects of a namespace.
type QoSPolicies interface {
	NetworkQoS(namespace string) ([]*ncv1.NetworkQoS, error)
}

// Detacher removes the attachments a claim still has (CNI DEL).
type Detacher interface {
	Detach(ctx context.Context, c *checkpoint.Claim) error
}

// Reporter tells users about failures: events on the claim and its pods, and
// the claim's device status.
type Reporter interface {
	PrepareFailed(ctx context.Context, claim *resourceapi.ResourceClaim, devices []checkpoint.Device, err error)
	Warn(ctx context.Context, claim *resourceapi.ResourceClaim, reason, message string)
	Unprepared(ctx context.Context, claim kubeletplugin.NamespacedObject)
}

// ErrorHandler receives the kubeletplugin helper's background errors
// (ResourceSlice publishing); it reports whether it handled one.
type ErrorHandler func(ctx context.Context, err error) bool

// Plugin implements kubeletplugin.DRAPlugin.
type Plugin struct {
	Pool     string
	Networks Networks
	Store    Store
	Pods     Pods
	// Claims reads claims for JoinShared (nil: pods joining a prepared
	// claim are not looked for).
	Claims   Claims
	QoS      QoSPolicies
	Peers    render.Peers
	Detacher Detacher
	Reporter Reporter
	OnError  ErrorHandler
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// ClaimTimeout bounds the preparation of one claim (default 10 s), so a
	// claim whose objects are slow to read cannot hold up the others.
	ClaimTimeout time.Duration
}

var _ kubeletplugin.DRAPlugin = (*Plugin)(nil)

// PrepareResourceClaims prepares each claim on its own.
func (p *Plugin) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	out := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	for _, claim := range claims {
		devices, err := p.prepareWithin(ctx, claim)
		if err != nil {
			klog.FromContext(ctx).Error(err, "Prepare failed", "claim", klog.KObj(claim))
		}
		out[claim.UID] = kubeletplugin.PrepareResult{Devices: devices, Err: err}
	}
	return out, nil
}

// prepareWithin prepares one claim under its own deadline.
func (p *Plugin) prepareWithin(ctx context.Context, claim *resourceapi.ResourceClaim) ([]kubeletplugin.Device, error) {
	timeout := p.ClaimTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return p.prepareClaim(ctx, claim)
}

func (p *Plugin) prepareClaim(ctx context.Context, claim *resourceapi.ResourceClaim) ([]kubeletplugin.Device, error) {
	if rec, ok := p.Store.Get(claim.UID); ok {
		if err := p.refreshPods(ctx, claim, rec); err != nil {
			return nil, err
		}
		return resultDevices(rec), nil
	}
	rec, err := p.build(ctx, claim)
	if err != nil {
		var devices []checkpoint.Device
		if rec != nil {
			devices = rec.Devices
		}
		p.Reporter.PrepareFailed(ctx, claim, devices, err)
		return nil, err
	}
	if err := p.Store.Put(rec); err != nil {
		return nil, fmt.Errorf("prepare claim %s/%s: %w", claim.Namespace, claim.Name, err)
	}
	return resultDevices(rec), nil
}

// refreshPods brings the record of a prepared claim up to date when it is
// prepared again. The same consumers (the kubelet retrying) get the recorded
// answer. A new consumer (a claim shared by several pods is prepared for each)
// needs every device's network still offered here, as a first Prepare would;
// pods that left the claim's reservedFor and have no attachment left are
// forgotten, so the record does not grow as pods come and go. The change is
// one Store.Update.
func (p *Plugin) refreshPods(ctx context.Context, claim *resourceapi.ResourceClaim, rec *checkpoint.Claim) error {
	pods, err := p.consumers(ctx, claim)
	if err != nil {
		return err
	}
	newcomer := false
	for _, pod := range pods {
		newcomer = newcomer || !rec.HasPod(pod.UID)
	}
	if !newcomer && len(pods) == len(rec.Pods) {
		return nil
	}
	for _, d := range rec.Devices {
		if _, ok := p.Networks.Lookup(d.Device); newcomer && !ok {
			return fmt.Errorf("prepare claim %s/%s for another pod: %w", claim.Namespace, claim.Name, &NotOfferedError{Device: d.Device, Request: d.Request})
		}
	}
	err = p.Store.Update(claim.UID, func(r *checkpoint.Claim) error {
		r.Pods = currentPods(r, pods)
		return nil
	})
	if err != nil {
		return fmt.Errorf("prepare claim %s/%s: %w", claim.Namespace, claim.Name, err)
	}
	return nil
}

// currentPods is the consumers to record: the claim's current consumers,
// and earlier ones that still have an attachment (their DEL is pending).
func currentPods(rec *checkpoint.Claim, current []checkpoint.Pod) []checkpoint.Pod {
	out := append([]checkpoint.Pod(nil), current...)
	reserved := make(map[types.UID]bool, len(current))
	for _, pod := range current {
		reserved[pod.UID] = true
	}
	for _, pod := range rec.Pods {
		if !reserved[pod.UID] && hasAttachment(rec, pod.UID) {
			out = append(out, pod)
		}
	}
	return out
}

func hasAttachment(rec *checkpoint.Claim, pod types.UID) bool {
	for _, d := range rec.Devices {
		for _, a := range d.Attachments {
			if a.PodUID == pod {
				return true
			}
		}
	}
	return false
}

// build resolves every device of the driver; on error it returns the
// devices it could resolve (for the failure status) and every problem.
func (p *Plugin) build(ctx context.Context, claim *resourceapi.ResourceClaim) (*checkpoint.Claim, error) {
	name := claim.Namespace + "/" + claim.Name
	if claim.Status.Allocation == nil {
		return nil, fmt.Errorf("claim %s is not allocated", name)
	}
	pods, err := p.consumers(ctx, claim)
	if err != nil {
		return nil, err
	}
	rec := &checkpoint.Claim{UID: claim.UID, Namespace: claim.Namespace, Name: claim.Name, Pods: pods, PreparedAt: p.now()}
	labels := map[string]string{}
	if len(pods) > 0 {
		labels = p.podLabels(ctx, pods[0])
	}
	var errs []error
	for _, res := range claim.Status.Allocation.Devices.Results {
		if res.Driver != contract.DriverName {
			continue
		}
		dev, err := p.device(ctx, claim, res, labels)
		if err != nil {
			errs = append(errs, &DeviceError{Device: res.Device, Err: err})
		}
		rec.Devices = append(rec.Devices, dev)
	}
	if len(errs) > 0 {
		return rec, fmt.Errorf("prepare claim %s: %w", name, errors.Join(errs...))
	}
	return rec, nil
}

// device prepares one allocated device; the returned Device names the
// device even on error, so the failure can be reported on it.
func (p *Plugin) device(ctx context.Context, claim *resourceapi.ResourceClaim, res resourceapi.DeviceRequestAllocationResult, podLabels map[string]string) (checkpoint.Device, error) {
	dev := checkpoint.Device{Request: res.Request, Pool: res.Pool, Device: res.Device}
	if res.ShareID != nil {
		dev.ShareID = string(*res.ShareID)
	}
	if res.Pool != p.Pool {
		return dev, fmt.Errorf("device %s of request %s is in pool %s, not this node's pool %s", res.Device, res.Request, res.Pool, p.Pool)
	}
	offer, ok := p.Networks.Lookup(res.Device)
	if !ok {
		return dev, &NotOfferedError{Device: res.Device, Request: res.Request}
	}
	net := offer.Network
	dev.Network, dev.DeviceID = net.Ref, offer.DeviceID
	if net.Ref.Namespace != "" && net.Ref.Namespace != claim.Namespace {
		return dev, &NamespaceError{Claim: claim.Namespace + "/" + claim.Name, Network: net.Ref}
	}
	cfg, err := OpaqueConfig(claim, res.Request)
	if err != nil {
		return dev, fmt.Errorf("request %s: %w", res.Request, err)
	}
	if cfg != nil {
		dev.InterfaceName, dev.MAC, dev.IPs = cfg.InterfaceName, cfg.MAC, cfg.IPs
	}
	dev.Bandwidth = Allocated(res)
	in := render.Input{Network: net, Config: cfg, Rules: p.qosRules(ctx, claim, net, podLabels), DeviceID: offer.DeviceID, Allocated: dev.Bandwidth}
	conf, err := render.ConfList(in)
	if err != nil {
		return dev, fmt.Errorf("request %s: %w", res.Request, err)
	}
	base, err := render.AttachmentQoS(in) // valid: ConfList rendered it
	if err != nil {
		return dev, fmt.Errorf("request %s: %w", res.Request, err)
	}
	dev.ConfList, dev.QoS = conf, &checkpoint.DeviceQoS{Base: base}
	return dev, nil
}

// Allocated is the bandwidth the scheduler allocated to the request on the
// device, in bits/s (its consumedCapacity "bandwidth", rounded up to whole
// bits; 0 when it consumed none).
func Allocated(res resourceapi.DeviceRequestAllocationResult) int64 {
	q, ok := res.ConsumedCapacity[contract.CapacityBandwidth]
	if !ok || q.Sign() <= 0 {
		return 0
	}
	return q.Value()
}

func (p *Plugin) qosRules(ctx context.Context, claim *resourceapi.ResourceClaim, net network.Network, podLabels map[string]string) []qos.Rule {
	if p.QoS == nil {
		return nil
	}
	objs, err := p.QoS.NetworkQoS(claim.Namespace)
	if err != nil {
		p.Reporter.Warn(ctx, claim, "NetworkQoSUnavailable", fmt.Sprintf("listing NetworkQoS of namespace %s: %v", claim.Namespace, err))
		return nil
	}
	rules, _, err := render.Rules(objs, render.Target{Namespace: claim.Namespace, PodLabels: podLabels, Network: net}, p.Peers)
	if err != nil {
		p.Reporter.Warn(ctx, claim, contract.ReasonNetworkQoSIgnored, fmt.Sprintf("some NetworkQoS rules for %s are not applied: %v", net.Ref, err))
	}
	return rules
}

func (p *Plugin) podLabels(ctx context.Context, pod checkpoint.Pod) map[string]string {
	obj, err := p.Pods.Pod(ctx, pod.Namespace, pod.Name)
	if err != nil || obj.UID != pod.UID {
		return map[string]string{}
	}
	return obj.Labels
}

// consumers lists the pods the claim is reserved for, with the claim's
// position in each pod's resource claims.
func (p *Plugin) consumers(ctx context.Context, claim *resourceapi.ResourceClaim) ([]checkpoint.Pod, error) {
	var pods []checkpoint.Pod
	for _, ref := range claim.Status.ReservedFor {
		if ref.Resource != "pods" || ref.APIGroup != "" {
			continue
		}
		pod := checkpoint.Pod{UID: ref.UID, Namespace: claim.Namespace, Name: ref.Name}
		obj, err := p.Pods.Pod(ctx, claim.Namespace, ref.Name)
		if err != nil {
			return nil, fmt.Errorf("get pod %s/%s of claim %s: %w", claim.Namespace, ref.Name, claim.Name, err)
		}
		if obj.UID == ref.UID {
			pod.Order = ClaimOrder(obj, claim.Name)
		}
		pods = append(pods, pod)
	}
	return pods, nil
}

func (p *Plugin) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

func resultDevices(rec *checkpoint.Claim) []kubeletplugin.Device {
	out := make([]kubeletplugin.Device, 0, len(rec.Devices))
	for _, d := range rec.Devices {
		dev := kubeletplugin.Device{Requests: []string{d.Request}, PoolName: d.Pool, DeviceName: d.Device}
		if d.ShareID != "" {
			id := types.UID(d.ShareID)
			dev.ShareID = &id
		}
		out = append(out, dev)
	}
	return out
}

// UnprepareResourceClaims detaches what is left of each claim and forgets it.
func (p *Plugin) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	out := make(map[types.UID]error, len(claims))
	for _, c := range claims {
		out[c.UID] = p.unprepare(ctx, c)
	}
	return out, nil
}

func (p *Plugin) unprepare(ctx context.Context, c kubeletplugin.NamespacedObject) error {
	rec, ok := p.Store.Get(c.UID)
	if !ok {
		return nil // never prepared here, or already unprepared
	}
	if err := p.Detacher.Detach(ctx, rec); err != nil {
		return fmt.Errorf("unprepare claim %s: %w", c.String(), err)
	}
	if err := p.Store.Delete(c.UID); err != nil {
		return fmt.Errorf("unprepare claim %s: %w", c.String(), err)
	}
	p.Reporter.Unprepared(ctx, c)
	return nil
}

// HandleError gets the helper's background errors.
func (p *Plugin) HandleError(ctx context.Context, err error, msg string) {
	if p.OnError != nil && p.OnError(ctx, err) {
		return
	}
	klog.FromContext(ctx).Error(err, msg)
}

// WatchHealthStatus: network devices have no health of their own to report.
func (p *Plugin) WatchHealthStatus(context.Context, chan<- kubeletplugin.DeviceHealthReport) error {
	return kubeletplugin.ErrHealthNotSupported
}
