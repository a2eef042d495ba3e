// Package status writes what netclass-dra did into the ResourceClaim's
// status.devices by server-side apply (field manager netclass.dev), one entry
// per device of the driver, leaving other drivers' entries alone, and tells
// users about failures with Events on the claim and its pods.
package status

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	resourceapi "k8s.io/api/resource/v1"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	resourceac "k8s.io/client-go/applyconfigurations/resource/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/netclass-dev/netclass/api/contract"
	"github.com/netclass-dev/netclass/conf/bandwidth"
	"github.com/netclass-dev/netclass/conf/message"
	"github.com/netclass-dev/netclass/shim/attachment"
)

// Condition reasons of the Ready condition of a device entry.
const (
	ConditionReady   = "Ready"
	ReasonAttached   = "Attached"
	ReasonPrepare    = "PrepareFailed"
	ReasonAttach     = "AttachFailed"
	ReasonNamespace  = "NamespaceMismatch"
	ReasonNotOffered = "NetworkNotOffered"
)

// Entry is the status of one allocated device of the driver.
type Entry struct {
	Pool, Device, ShareID string
	Network               attachment.NetworkRef
	// InterfaceName, MAC and IPs (CIDR form) once attached.
	InterfaceName string
	MAC           string
	IPs           []string
	// Pods are each pod's interface, when several pods share the claim.
	Pods []contract.PodInterface
	// Bandwidth is what the scheduler allocated to the claim on the device
	// (bits/s; 0: none).
	Bandwidth int64
	Ready     bool
	Reason    string
	Message   string
}

// Apply builds the apply configuration of a claim's status with the entries.
// Applying it with field manager netclass.dev makes these entries the
// manager's whole set: entries it wrote before and does not list are removed,
// other managers' entries are untouched.
func Apply(namespace, name string, entries []Entry, now time.Time) (*resourceac.ResourceClaimApplyConfiguration, error) {
	st := resourceac.ResourceClaimStatus()
	for _, e := range entries {
		dev, err := deviceStatus(e, now)
		if err != nil {
			return nil, fmt.Errorf("status of claim %s/%s: %w", namespace, name, err)
		}
		st.WithDevices(dev)
	}
	return resourceac.ResourceClaim(name, namespace).WithStatus(st), nil
}

func deviceStatus(e Entry, now time.Time) (*resourceac.AllocatedDeviceStatusApplyConfiguration, error) {
	data, err := statusData(e)
	if err != nil {
		return nil, err
	}
	var omitted []string
	if n := len(e.IPs) - resourceapi.NetworkDeviceDataMaxIPs; n > 0 {
		e.IPs = e.IPs[:resourceapi.NetworkDeviceDataMaxIPs]
		omitted = append(omitted, fmt.Sprintf("%d addresses left out of networkData (%d at most)", n, resourceapi.NetworkDeviceDataMaxIPs))
	}
	if data.PodsOmitted > 0 {
		omitted = append(omitted, fmt.Sprintf("%d pods' interfaces left out of data.pods (the data's %d bytes at most)", data.PodsOmitted, resourceapi.AllocatedDeviceStatusDataMaxLength))
	}
	dev := resourceac.AllocatedDeviceStatus().
		WithDriver(contract.DriverName).WithPool(e.Pool).WithDevice(e.Device).
		WithData(runtime.RawExtension{Raw: data.raw}).
		WithConditions(condition(e, now, omitted))
	if e.ShareID != "" {
		dev.WithShareID(e.ShareID)
	}
	if e.InterfaceName != "" || e.MAC != "" || len(e.IPs) > 0 {
		nd := resourceac.NetworkDeviceData().WithInterfaceName(e.InterfaceName).WithHardwareAddress(e.MAC)
		if len(e.IPs) > 0 {
			nd.WithIPs(e.IPs...)
		}
		dev.WithNetworkData(nd)
	}
	return dev, nil
}

// encodedData is an entry's status data as written.
type encodedData struct {
	raw         []byte
	PodsOmitted int
}

// statusData encodes the entry's data within the API's bound, with as
// many of a shared claim's pods (the first attached first) as fit.
func statusData(e Entry) (encodedData, error) {
	d := contract.ClaimStatusData{PodNetwork: e.Network.Name, PodNetworkNamespace: e.Network.Namespace,
		NetworkClass: e.Network.Class, Pods: e.Pods, Bandwidth: bandwidthText(e.Bandwidth)}
	raw, err := json.Marshal(d)
	if err != nil || len(raw) <= resourceapi.AllocatedDeviceStatusDataMaxLength {
		return encodedData{raw: raw}, err
	}
	// The most pods that fit: a binary search over the count (the data
	// grows with it), with the count left out written too.
	fits := func(k int) ([]byte, bool) {
		d.Pods, d.PodsOmitted = e.Pods[:k], len(e.Pods)-k
		b, err := json.Marshal(d)
		return b, err == nil && len(b) <= resourceapi.AllocatedDeviceStatusDataMaxLength
	}
	k := sort.Search(len(e.Pods)+1, func(k int) bool { _, ok := fits(k); return !ok }) - 1
	if raw, ok := fits(max(k, 0)); ok {
		return encodedData{raw: raw, PodsOmitted: len(e.Pods) - max(k, 0)}, nil
	}
	return encodedData{}, fmt.Errorf("status data of device %s: over the API's %d bytes without any pod's interface", e.Device, resourceapi.AllocatedDeviceStatusDataMaxLength)
}

func condition(e Entry, now time.Time, omitted []string) *metav1ac.ConditionApplyConfiguration {
	status, reason, msg := metav1.ConditionFalse, e.Reason, e.Message
	if e.Ready {
		status = metav1.ConditionTrue
		if reason == "" {
			reason = ReasonAttached
		}
		if msg == "" {
			msg = fmt.Sprintf("%s attached as %s", e.Network, e.InterfaceName)
			if e.Bandwidth > 0 {
				msg += fmt.Sprintf(", %s bit/s of bandwidth allocated (its egress ceiling)", bandwidthText(e.Bandwidth))
			}
		}
	}
	if len(omitted) > 0 {
		msg += "; " + strings.Join(omitted, "; ")
	}
	return metav1ac.Condition().WithType(ConditionReady).WithStatus(status).
		WithReason(reason).WithMessage(message.Truncate(msg, message.MaxCondition)).WithLastTransitionTime(metav1.NewTime(now))
}

// bandwidthText is an allocation as a quantity ("30M"; "" for none).
func bandwidthText(bits int64) string {
	if bits <= 0 {
		return ""
	}
	q := bandwidth.Quantity(bits)
	return q.String()
}

// Writer applies claim statuses with bounded retries.
type Writer struct {
	Client kubernetes.Interface
	// Attempts bounds the tries of one write (default 5).
	Attempts int
	// Backoff is the first pause between tries, doubled each time (default 50 ms).
	Backoff time.Duration
	Now     func() time.Time
}

// Write applies the entries as netclass.dev's part of the claim's status.
// A claim that is gone is no error.
func (w *Writer) Write(ctx context.Context, namespace, name string, entries []Entry) error {
	now := time.Now
	if w.Now != nil {
		now = w.Now
	}
	ac, err := Apply(namespace, name, entries, now())
	if err != nil {
		return err
	}
	attempts, pause := w.Attempts, w.Backoff
	if attempts <= 0 {
		attempts = 5
	}
	if pause <= 0 {
		pause = 50 * time.Millisecond
	}
	var last error
	for i := range attempts {
		_, last = w.Client.ResourceV1().ResourceClaims(namespace).ApplyStatus(ctx, ac,
			metav1.ApplyOptions{FieldManager: contract.FieldManager, Force: true})
		if applyDropsAllocation(last) {
			last = w.update(ctx, namespace, name, entries, now())
		}
		switch {
		case last == nil, apierrors.IsNotFound(last):
			return nil
		case !retriable(last) || i == attempts-1:
			return fmt.Errorf("apply status of claim %s/%s (%d entries): %w", namespace, name, len(entries), last)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("apply status of claim %s/%s: %w (last error: %v)", namespace, name, ctx.Err(), last)
		case <-time.After(pause):
		}
		pause *= 2
	}
	return last
}

func retriable(err error) bool {
	return apierrors.IsConflict(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
		apierrors.IsTooManyRequests(err) || apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err) ||
		errors.Is(err, context.DeadlineExceeded) || apierrors.ReasonForError(err) == metav1.StatusReasonUnknown
}

// entryReason picks the condition reason of an error.
func entryReason(err error, fallback string) string {
	var r interface{ Reason() string }
	if errors.As(err, &r) {
		return r.Reason()
	}
	return fallback
}

// applyDropsAllocation recognises the API server refusing an apply because
// its merge lost status.allocation. Observed on v1.37.1 for every status
// apply (whatever its content, by any manager) to a claim whose allocation
// carries an opaque configuration with the key "interfaceName": the merged
// object has no allocation, which validation refuses as a change.
func applyDropsAllocation(err error) bool {
	return apierrors.IsInvalid(err) && strings.Contains(err.Error(), "status.allocation: Invalid value: null")
}

// update writes the entries with an update of the status instead (read,
// replace netclass.dev's entries, keep everyone else's, write with the
// resourceVersion read: a conflict is retried by the caller).
func (w *Writer) update(ctx context.Context, namespace, name string, entries []Entry, now time.Time) error {
	claims := w.Client.ResourceV1().ResourceClaims(namespace)
	claim, err := claims.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	devices := make([]resourceapi.AllocatedDeviceStatus, 0, len(claim.Status.Devices)+len(entries))
	for _, d := range claim.Status.Devices {
		if d.Driver != contract.DriverName {
			devices = append(devices, d)
		}
	}
	for _, e := range entries {
		d, err := typedDevice(e, now)
		if err != nil {
			return err
		}
		devices = append(devices, d)
	}
	claim.Status.Devices = devices
	_, err = claims.UpdateStatus(ctx, claim, metav1.UpdateOptions{FieldManager: contract.FieldManager})
	return err
}

// typedDevice is the entry as a typed device status (for updates).
func typedDevice(e Entry, now time.Time) (resourceapi.AllocatedDeviceStatus, error) {
	ac, err := deviceStatus(e, now)
	if err != nil {
		return resourceapi.AllocatedDeviceStatus{}, err
	}
	raw, err := json.Marshal(ac)
	if err != nil {
		return resourceapi.AllocatedDeviceStatus{}, err
	}
	var d resourceapi.AllocatedDeviceStatus
	err = json.Unmarshal(raw, &d)
	return d, err
}
