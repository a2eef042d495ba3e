package harness

import (
	"context"
	"fmt"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/netclass-dev/netclass/api/contract"
	"github.com/netclass-dev/netclass/test/testbed"
)

// Device is a published device with the slice it is in.
type Device struct {
	Slice  string
	Pool   string
	Device resourceapi.Device
}

// Attr returns a string attribute of the device ("" when absent).
func (d Device) Attr(name resourceapi.QualifiedName) string {
	if a, ok := d.Device.Attributes[name]; ok && a.StringValue != nil {
		return *a.StringValue
	}
	return ""
}

// Devices lists the devices of netclass.dev slices of node 1.
func (e *Env) Devices(ctx context.Context) ([]Device, error) {
	return e.DevicesOn(ctx, e.Node)
}

// DevicesOn lists the devices of netclass.dev slices of a node.
func (e *Env) DevicesOn(ctx context.Context, node string) ([]Device, error) {
	list, err := e.Kube.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{
		FieldSelector: "spec.driver=" + contract.DriverName + ",spec.nodeName=" + node})
	if err != nil {
		return nil, err
	}
	var out []Device
	for _, s := range list.Items {
		for _, d := range s.Spec.Devices {
			out = append(out, Device{Slice: s.Name, Pool: s.Spec.Pool.Name, Device: d})
		}
	}
	return out, nil
}

// FindDevice returns the device node 1 publishes for a network of a class.
func (e *Env) FindDevice(ctx context.Context, class, namespace, name string) (Device, bool, error) {
	return e.FindDeviceOn(ctx, e.Node, class, namespace, name)
}

// FindDeviceOn returns the device a node publishes for a network of a class.
func (e *Env) FindDeviceOn(ctx context.Context, node, class, namespace, name string) (Device, bool, error) {
	devs, err := e.DevicesOn(ctx, node)
	if err != nil {
		return Device{}, false, err
	}
	for _, d := range devs {
		if d.Attr(contract.AttributeStdNetworkClass) == class && d.Attr(contract.AttributeStdPodNetwork) == name &&
			d.Attr(contract.AttributeStdPodNetworkNamespace) == namespace {
			return d, true, nil
		}
	}
	return Device{}, false, nil
}

// WaitDevice waits until node 1 publishes the network's device (present=true)
// or withdrew it.
func (e *Env) WaitDevice(t testing.TB, class, namespace, name string, present bool) Device {
	t.Helper()
	return e.WaitDeviceOn(t, e.Node, class, namespace, name, present)
}

// WaitDeviceOn waits until a node publishes the network's device
// (present=true) or withdrew it.
func (e *Env) WaitDeviceOn(t testing.TB, node, class, namespace, name string, present bool) Device {
	t.Helper()
	var found Device
	what := fmt.Sprintf("device of %s/%s in class %s published=%v on node %s", namespace, name, class, present, node)
	testbed.Poll(t, testbed.Context(t, WaitTimeout), 100*time.Millisecond, what, func(ctx context.Context) (bool, string, error) {
		d, ok, err := e.FindDeviceOn(ctx, node, class, namespace, name)
		if err != nil {
			return false, err.Error(), nil
		}
		found = d
		return ok == present, fmt.Sprintf("found=%v", ok), nil
	})
	return found
}

// ForeignSlice publishes a hand-made ResourceSlice of another driver on the
// node, with a device that has none of netclass's attributes (the proposals'
// bare selectors fail on it); it is deleted when the test ends.
func (e *Env) ForeignSlice(t testing.TB) string {
	t.Helper()
	ctx := testbed.Context(t, time.Minute)
	name := "e2e-foreign-" + Unique(6)
	s := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourceapi.ResourceSliceSpec{
			Driver: "foreign.e2e.example.com", NodeName: ptr.To(e.Node),
			Pool: resourceapi.ResourcePool{Name: name, Generation: 1, ResourceSliceCount: 1},
			Devices: []resourceapi.Device{{Name: "gpu0", Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"foreign.e2e.example.com/model": {StringValue: ptr.To("x1")}}}},
		},
	}
	if _, err := e.Kube.ResourceV1().ResourceSlices().Create(ctx, s, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create foreign ResourceSlice: %v", err)
	}
	t.Cleanup(func() { e.deleteQuietly(t, "ResourceSlice", name, e.Kube.ResourceV1().ResourceSlices().Delete) })
	return name
}
