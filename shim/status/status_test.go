package status

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/netclass-dev/netclass/api/contract"
	"github.com/netclass-dev/netclass/shim/attachment"
	"github.com/netclass-dev/netclass/shim/checkpoint"
)

var now = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func TestApply(t *testing.T) {
	entries := []Entry{
		{Pool: "node1", Device: "blue-1", ShareID: "share-1",
			Network:       attachment.NetworkRef{Class: "netclass", Kind: "PodNetwork", Name: "blue"},
			InterfaceName: "net1", MAC: "02:00:00:00:00:01", IPs: []string{"10.10.1.5/24"}, Ready: true},
		{Pool: "node1", Device: "red-2",
			Network: attachment.NetworkRef{Class: "nets", Kind: "Network", Namespace: "tenant-a", Name: "red"},
			Reason:  ReasonNamespace, Message: "refused"},
		{Pool: "node1", Device: "green-3", ShareID: "share-3", Bandwidth: 30_000_000,
			Network:       attachment.NetworkRef{Class: "netclass", Kind: "PodNetwork", Name: "green"},
			InterfaceName: "net2", Ready: true},
	}
	ac, err := Apply("ns", "claim", entries, now)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(ac)
	var got struct {
		Kind, APIVersion string
		Metadata         struct{ Name, Namespace string }
		Status           resourceapi.ResourceClaimStatus
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if got.Kind != "ResourceClaim" || got.APIVersion != "resource.k8s.io/v1" || got.Metadata.Name != "claim" || got.Metadata.Namespace != "ns" {
		t.Fatalf("identity: %s", raw)
	}
	devs := got.Status.Devices
	if len(devs) != 3 {
		t.Fatalf("devices: %s", raw)
	}
	d := devs[0]
	if d.Driver != "netclass.dev" || d.Pool != "node1" || d.Device != "blue-1" || d.ShareID == nil || *d.ShareID != "share-1" {
		t.Fatalf("device 0: %+v", d)
	}
	if d.NetworkData == nil || d.NetworkData.InterfaceName != "net1" || d.NetworkData.HardwareAddress != "02:00:00:00:00:01" || d.NetworkData.IPs[0] != "10.10.1.5/24" {
		t.Fatalf("networkData: %+v", d.NetworkData)
	}
	if string(d.Data.Raw) != `{"podNetwork":"blue","networkClass":"netclass"}` {
		t.Fatalf("data: %s", d.Data.Raw)
	}
	if len(d.Conditions) != 1 || d.Conditions[0].Type != "Ready" || d.Conditions[0].Status != "True" || d.Conditions[0].Reason != ReasonAttached {
		t.Fatalf("conditions: %+v", d.Conditions)
	}
	f := devs[1]
	if f.NetworkData != nil || f.Conditions[0].Status != "False" || f.Conditions[0].Reason != ReasonNamespace || f.Conditions[0].Message != "refused" {
		t.Fatalf("failed device: %+v", f)
	}
	if string(f.Data.Raw) != `{"podNetwork":"red","podNetworkNamespace":"tenant-a","networkClass":"nets"}` {
		t.Fatalf("data: %s", f.Data.Raw)
	}
	bw := devs[2]
	if string(bw.Data.Raw) != `{"podNetwork":"green","networkClass":"netclass","bandwidth":"30M"}` {
		t.Fatalf("data of a device with allocated bandwidth: %s", bw.Data.Raw)
	}
	if m := bw.Conditions[0].Message; !strings.Contains(m, "30M bit/s of bandwidth allocated") {
		t.Fatalf("Ready message of a device with allocated bandwidth: %q", m)
	}
	if strings.Contains(d.Conditions[0].Message, "bandwidth") {
		t.Fatalf("Ready message of a device without allocated bandwidth: %q", d.Conditions[0].Message)
	}
	// No entries: the apply names no device, so server-side apply removes
	// the ones the manager owned.
	ac, _ = Apply("ns", "claim", nil, now)
	raw, _ = json.Marshal(ac)
	if !strings.Contains(string(raw), `"status":{}`) {
		t.Fatalf("empty apply: %s", raw)
	}
}

type reasoned struct{ error }

func (reasoned) Reason() string { return "Special" }

func TestEntries(t *testing.T) {
	c := &checkpoint.Claim{Namespace: "ns", Name: "c", Devices: []checkpoint.Device{
		{Pool: "p", Device: "d1", Attachments: []checkpoint.Attachment{
			{SandboxID: "old", State: checkpoint.Attached, Result: &checkpoint.Result{InterfaceName: "net1", IPs: []string{"10.0.0.1/24"}}},
			{SandboxID: "new", State: checkpoint.Attached, Result: &checkpoint.Result{InterfaceName: "net1", IPs: []string{"10.0.0.2/24"}}},
			{SandboxID: "newest", State: checkpoint.Adding},
		}},
		{Pool: "p", Device: "d2"},
		{Pool: "p", Device: "d3", Bandwidth: 5},
	}}
	got := Entries(c, map[string]error{"d3": reasoned{errors.New("boom")}})
	if len(got) != 2 {
		t.Fatalf("entries %+v", got)
	}
	if !got[0].Ready || got[0].IPs[0] != "10.0.0.2/24" {
		t.Errorf("d1: %+v, want the latest completed attachment", got[0])
	}
	if ps := got[0].Pods; len(ps) != 2 || ps[0].IPs[0] != "10.0.0.1/24" || ps[1].IPs[0] != "10.0.0.2/24" {
		t.Errorf("d1's pods: %+v, want each attached pod's addresses", ps)
	}
	c.Devices[0].Attachments = c.Devices[0].Attachments[1:]
	if ps := Entries(c, nil)[0].Pods; ps != nil {
		t.Errorf("a claim of one pod lists its pods: %+v", ps)
	}
	if got[1].Device != "d3" || got[1].Ready || got[1].Reason != "Special" || got[1].Message != "boom" || got[1].Bandwidth != 5 {
		t.Errorf("d3: %+v", got[1])
	}
}

func TestWriterRetries(t *testing.T) {
	for _, tc := range []struct {
		name    string
		errs    []error
		calls   int
		wantErr bool
	}{
		{"success", nil, 1, false},
		{"conflicts then success", []error{conflict(), conflict()}, 3, false},
		{"bounded", []error{conflict(), conflict(), conflict()}, 3, true},
		{"invalid is final", []error{apierrors.NewInvalid(schema.GroupKind{Group: "resource.k8s.io", Kind: "ResourceClaim"}, "c", nil)}, 1, true},
		{"claim gone is no error", []error{apierrors.NewNotFound(schema.GroupResource{Resource: "resourceclaims"}, "c")}, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewSimpleClientset()
			calls := 0
			client.PrependReactor("patch", "resourceclaims", func(a k8stesting.Action) (bool, runtime.Object, error) {
				calls++
				p := a.(k8stesting.PatchAction)
				if a.GetSubresource() != "status" || p.GetPatchType() != "application/apply-patch+yaml" {
					t.Errorf("unexpected patch %s %s", a.GetSubresource(), p.GetPatchType())
				}
				if calls <= len(tc.errs) {
					return true, nil, tc.errs[calls-1]
				}
				return true, &resourceapi.ResourceClaim{}, nil
			})
			w := &Writer{Client: client, Attempts: 3, Backoff: time.Millisecond}
			err := w.Write(context.Background(), "ns", "c", []Entry{{Pool: "p", Device: "d", Ready: true}})
			if (err != nil) != tc.wantErr || calls != tc.calls {
				t.Fatalf("err = %v after %d calls; want error %v after %d", err, calls, tc.wantErr, tc.calls)
			}
		})
	}
}

func conflict() error {
	return apierrors.NewConflict(schema.GroupResource{Group: "resource.k8s.io", Resource: "resourceclaims"}, "c", errors.New("changed"))
}

// The API server refuses applies to claims whose opaque configuration holds
// "interfaceName" (v1.37.1): the writer falls back to an update that keeps
// other drivers' entries.
func TestWriterFallsBackToUpdate(t *testing.T) {
	claim := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"},
		Status: resourceapi.ResourceClaimStatus{Devices: []resourceapi.AllocatedDeviceStatus{
			{Driver: "gpu.example.com", Pool: "p", Device: "gpu0"},
			{Driver: "netclass.dev", Pool: "p", Device: "old"},
		}},
	}
	client := fake.NewSimpleClientset(claim)
	client.PrependReactor("patch", "resourceclaims", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInvalid(schema.GroupKind{Group: "resource.k8s.io", Kind: "ResourceClaim"}, "c",
			field.ErrorList{field.Invalid(field.NewPath("status", "allocation"), nil, "field cannot be modified once set")})
	})
	w := &Writer{Client: client, Attempts: 2, Backoff: time.Millisecond}
	if err := w.Write(context.Background(), "ns", "c", []Entry{{Pool: "p", Device: "new", Ready: true, InterfaceName: "net1"}}); err != nil {
		t.Fatal(err)
	}
	got, err := client.ResourceV1().ResourceClaims("ns").Get(context.Background(), "c", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range got.Status.Devices {
		names = append(names, d.Driver+"/"+d.Device)
	}
	if strings.Join(names, ",") != "gpu.example.com/gpu0,netclass.dev/new" {
		t.Fatalf("devices after the fallback: %v", names)
	}
	if nd := got.Status.Devices[1].NetworkData; nd == nil || nd.InterfaceName != "net1" || got.Status.Devices[1].Conditions[0].Reason != ReasonAttached {
		t.Fatalf("entry %+v", got.Status.Devices[1])
	}
}

// A status stays within what the API server takes: at most 16 addresses in
// networkData and 10 KiB of data, as many of a shared claim's pods as fit
// (the first attached), the count left out in data.podsOmitted, and both
// said in the Ready message. (Over them, the apply is refused as Invalid
// and never retried: the claim would keep a stale status.)
func TestApplyKeepsWithinTheAPIsBounds(t *testing.T) {
	e := Entry{Pool: "node1", Device: "blue-1", Network: attachment.NetworkRef{Class: "netclass", Kind: "PodNetwork", Name: "blue"},
		InterfaceName: "net1", Ready: true}
	for i := range 20 {
		e.IPs = append(e.IPs, fmt.Sprintf("10.10.%d.5/24", i))
	}
	for i := range 256 {
		e.Pods = append(e.Pods, contract.PodInterface{UID: fmt.Sprintf("uid-%03d", i), Name: strings.Repeat("p", 250) + fmt.Sprintf("%03d", i),
			InterfaceName: "net1", IPs: []string{fmt.Sprintf("10.10.%d.%d/24", i/250, i%250)}})
	}
	ac, err := Apply("ns", "claim", []Entry{e}, now)
	if err != nil {
		t.Fatal(err)
	}
	d := ac.Status.Devices[0]
	if n := len(d.NetworkData.IPs); n != resourceapi.NetworkDeviceDataMaxIPs {
		t.Errorf("networkData has %d addresses", n)
	}
	raw := d.Data.Raw
	var data contract.ClaimStatusData
	if err := json.Unmarshal(raw, &data); err != nil || len(raw) > resourceapi.AllocatedDeviceStatusDataMaxLength {
		t.Fatalf("data of %d bytes: %v", len(raw), err)
	}
	if kept := len(data.Pods); kept == 0 || kept+data.PodsOmitted != len(e.Pods) || data.Pods[kept-1].UID != e.Pods[kept-1].UID {
		t.Fatalf("%d pods kept, %d omitted, of %d", kept, data.PodsOmitted, len(e.Pods))
	}
	omitted := data.PodsOmitted
	data.Pods, data.PodsOmitted = e.Pods[:len(data.Pods)+1], omitted-1
	if more, _ := json.Marshal(data); len(more) <= resourceapi.AllocatedDeviceStatusDataMaxLength {
		t.Errorf("one pod more would fit (%d bytes)", len(more))
	}
	msg := *d.Conditions[0].Message
	for _, want := range []string{"4 addresses left out of networkData (16 at most)", fmt.Sprintf("%d pods' interfaces left out of data.pods", omitted)} {
		if !strings.Contains(msg, want) {
			t.Errorf("Ready message %q does not say %q", msg, want)
		}
	}
}

// A status the API server refuses as invalid is a Warning Event on the
// claim, naming the error: the claim keeps its previous status, and the
// log alone would hide that from its user.
func TestRefusedStatusIsAnEventOnTheClaim(t *testing.T) {
	client := fake.NewSimpleClientset()
	client.PrependReactor("patch", "resourceclaims", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInvalid(schema.GroupKind{Group: "resource.k8s.io", Kind: "ResourceClaim"}, "c",
			field.ErrorList{field.TooLong(field.NewPath("status", "devices").Index(0).Child("data"), "", 10240)})
	})
	events := record.NewFakeRecorder(4)
	r := &Reporter{Status: &Writer{Client: client, Attempts: 1}, Events: events}
	err := r.Attached(context.Background(), &checkpoint.Claim{UID: "u1", Namespace: "ns", Name: "c"}, nil)
	if !apierrors.IsInvalid(err) {
		t.Fatalf("error %v", err)
	}
	select {
	case ev := <-events.Events:
		if !strings.HasPrefix(ev, "Warning "+EventStatusRefused+" ") || !strings.Contains(ev, "status.devices[0].data") {
			t.Fatalf("event %q", ev)
		}
	default:
		t.Fatal("no Event on the claim")
	}
}

type capturedWrite struct{ entries []Entry }

func (c *capturedWrite) Write(_ context.Context, _, _ string, entries []Entry) error {
	c.entries = entries
	return nil
}

// deviceErr is how shim/prepare names the device an error is of.
type deviceErr struct {
	device string
	error
}

func (e deviceErr) FailedDevice() string { return e.device }
func (e deviceErr) Unwrap() error        { return e.error }

// A failed Prepare reports each device with its own error and reason; a
// device that was fine says another one failed; an error of the claim as
// a whole (no device's) is every device's.
func TestPrepareFailedReportsEachDevicesOwnReason(t *testing.T) {
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}}
	devices := []checkpoint.Device{{Device: "ok"}, {Device: "gone"}, {Device: "bad"}}
	perDevice := fmt.Errorf("prepare claim ns/c: %w", errors.Join(
		deviceErr{"gone", reasoned{errors.New("not offered")}}, deviceErr{"bad", errors.New("bad config")}))
	for name, tc := range map[string]struct {
		err  error
		want []string
	}{
		"per device": {perDevice, []string{
			"ok PrepareFailed not prepared: another device of the claim failed: prepare claim ns/c: not offered\nbad config",
			"gone Special not offered", "bad PrepareFailed bad config"}},
		"the claim's": {reasoned{errors.New("claim not allocated")}, []string{
			"ok Special claim not allocated", "gone Special claim not allocated", "bad Special claim not allocated"}},
	} {
		t.Run(name, func(t *testing.T) {
			w := &capturedWrite{}
			(&Reporter{Status: w, Events: record.NewFakeRecorder(8)}).PrepareFailed(context.Background(), claim, devices, tc.err)
			var got []string
			for _, e := range w.entries {
				got = append(got, e.Device+" "+e.Reason+" "+e.Message)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("entries\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}
