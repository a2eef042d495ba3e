package status

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"

	"github.com/netclass-dev/netclass/api/contract"
	"github.com/netclass-dev/netclass/conf/message"
	"github.com/netclass-dev/netclass/shim/checkpoint"
)

// Event reasons.
const (
	EventPrepareFailed = "NetworkPrepareFailed"
	EventAttachFailed  = "NetworkAttachFailed"
	EventAttached      = "NetworkAttached"
	// EventStatusRefused: the API server refused the claim's status as
	// invalid.
	EventStatusRefused = "NetworkStatusRefused"
)

// StatusWriter applies a claim's entries.
type StatusWriter interface {
	Write(ctx context.Context, namespace, name string, entries []Entry) error
}

// Reporter writes claim statuses and Events.
type Reporter struct {
	Status StatusWriter
	Events record.EventRecorder
}

// PrepareFailed records a failed Prepare: a Warning Event on the claim and on
// each pod it is reserved for, and Ready=False entries for its devices.
func (r *Reporter) PrepareFailed(ctx context.Context, claim *resourceapi.ResourceClaim, devices []checkpoint.Device, err error) {
	msg := err.Error()
	r.Events.Event(claimRef(claim.Namespace, claim.Name, claim.UID), corev1.EventTypeWarning, EventPrepareFailed, msg)
	for _, c := range claim.Status.ReservedFor {
		if c.Resource == "pods" && c.APIGroup == "" {
			r.Events.Event(PodRef(claim.Namespace, c.Name, string(c.UID)), corev1.EventTypeWarning, EventPrepareFailed,
				fmt.Sprintf("claim %s: %s", claim.Name, msg))
		}
	}
	if len(devices) == 0 {
		return
	}
	own := deviceErrors(err)
	entries := make([]Entry, 0, len(devices))
	for _, d := range devices {
		e := Entry{Pool: d.Pool, Device: d.Device, ShareID: d.ShareID, Network: d.Network, Bandwidth: d.Bandwidth,
			Reason: ReasonPrepare, Message: "not prepared: another device of the claim failed: " + msg}
		if derr, failed := own[d.Device]; failed {
			e.Reason, e.Message = entryReason(derr, ReasonPrepare), derr.Error()
		} else if len(own) == 0 {
			e.Reason, e.Message = entryReason(err, ReasonPrepare), msg // the claim's failure, not a device's
		}
		entries = append(entries, e)
	}
	if werr := r.Status.Write(ctx, claim.Namespace, claim.Name, entries); werr != nil {
		klog.FromContext(ctx).Error(werr, "Writing the failure into the claim's status failed", "claim", klog.KObj(claim))
	}
}

// Warn records a Warning Event on the claim.
func (r *Reporter) Warn(_ context.Context, claim *resourceapi.ResourceClaim, reason, message string) {
	r.Events.Event(claimRef(claim.Namespace, claim.Name, claim.UID), corev1.EventTypeWarning, reason, message)
}

// Unprepared removes netclass's entries from the claim's status (best effort:
// the claim is usually being deallocated or deleted).
func (r *Reporter) Unprepared(ctx context.Context, claim kubeletplugin.NamespacedObject) {
	if err := r.Status.Write(ctx, claim.Namespace, claim.Name, nil); err != nil {
		klog.FromContext(ctx).V(2).Info("Clearing the claim's status failed", "claim", claim.String(), "err", err)
	}
}

// Attached writes the status of every device of a claim from its record:
// the latest attachment of each device, or the failure given for it.
// A status the API server refuses as invalid (never retried: the claim
// keeps its previous status) is also a Warning Event on the claim.
func (r *Reporter) Attached(ctx context.Context, c *checkpoint.Claim, failures map[string]error) error {
	err := r.Status.Write(ctx, c.Namespace, c.Name, Entries(c, failures))
	if apierrors.IsInvalid(err) {
		r.Events.Event(claimRef(c.Namespace, c.Name, c.UID), corev1.EventTypeWarning, EventStatusRefused, message.Truncate("netclass.dev's status of the claim was refused, the previous one stays: "+err.Error(), 1024))
	}
	return err
}

// PodEvent records an Event on a pod.
func (r *Reporter) PodEvent(p checkpoint.Pod, eventType, reason, message string) {
	r.Events.Event(PodRef(p.Namespace, p.Name, string(p.UID)), eventType, reason, message)
}

// Entries computes a claim's entries: per device, the failure given for it
// (keyed by device name), else its latest completed attachment. Devices with
// neither have no entry yet.
func Entries(c *checkpoint.Claim, failures map[string]error) []Entry {
	var out []Entry
	for _, d := range c.Devices {
		e := Entry{Pool: d.Pool, Device: d.Device, ShareID: d.ShareID, Network: d.Network, Bandwidth: d.Bandwidth}
		if err, failed := failures[d.Device]; failed {
			e.Reason, e.Message = entryReason(err, ReasonAttach), err.Error()
			out = append(out, e)
			continue
		}
		var last *checkpoint.Attachment
		var pods []contract.PodInterface
		for i := range d.Attachments {
			if a := &d.Attachments[i]; a.State == checkpoint.Attached && a.Result != nil {
				last = a
				pods = append(pods, contract.PodInterface{UID: string(a.PodUID), Name: podName(c, a.PodUID), InterfaceName: a.Result.InterfaceName, IPs: a.Result.IPs})
			}
		}
		if last == nil {
			continue
		}
		e.Ready = true
		e.InterfaceName, e.MAC, e.IPs = last.Result.InterfaceName, last.Result.MAC, last.Result.IPs
		if len(pods) > 1 {
			e.Pods = pods
		}
		out = append(out, e)
	}
	return out
}

func podName(c *checkpoint.Claim, uid types.UID) string {
	for _, p := range c.Pods {
		if p.UID == uid {
			return p.Name
		}
	}
	return ""
}

// PodRef references a pod for an Event.
func PodRef(namespace, name, uid string) *corev1.ObjectReference {
	return &corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: namespace, Name: name, UID: types.UID(uid)}
}

// claimRef references a ResourceClaim for an Event.
func claimRef(namespace, name string, uid types.UID) *corev1.ObjectReference {
	return &corev1.ObjectReference{APIVersion: "resource.k8s.io/v1", Kind: "ResourceClaim", Namespace: namespace, Name: name, UID: uid}
}

// deviceErrors finds, in a Prepare error, the errors of single devices
// (those naming one with FailedDevice), by device.
func deviceErrors(err error) map[string]error {
	out := map[string]error{}
	var walk func(error)
	walk = func(err error) {
		switch e := err.(type) {
		case interface{ FailedDevice() string }:
			out[e.FailedDevice()] = err
		case interface{ Unwrap() []error }:
			for _, inner := range e.Unwrap() {
				walk(inner)
			}
		case interface{ Unwrap() error }:
			walk(e.Unwrap())
		}
	}
	walk(err)
	return out
}
