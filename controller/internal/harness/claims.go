package harness

import (
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Slice is a ResourceSlice of driver's pool with devices.
func Slice(driver, pool string, devices ...resourceapi.Device) *resourceapi.ResourceSlice {
	return &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: driver + "-" + pool},
		Spec:       resourceapi.ResourceSliceSpec{Driver: driver, Pool: resourceapi.ResourcePool{Name: pool}, Devices: devices},
	}
}

// Device is a device with string attributes.
func Device(name string, attrs map[string]string) resourceapi.Device {
	d := resourceapi.Device{Name: name, Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{}}
	for k, v := range attrs {
		d.Attributes[resourceapi.QualifiedName(k)] = resourceapi.DeviceAttribute{StringValue: &v}
	}
	return d
}

// Result is one allocated device.
type Result struct{ Driver, Pool, Device string }

// Alloc is the allocated device of driver's pool.
func Alloc(driver, pool, device string) Result {
	return Result{Driver: driver, Pool: pool, Device: device}
}

// Claim is a ResourceClaim of namespace "ns", allocated results (unallocated if nil), with
// the status entries.
func Claim(name string, results []Result, status []resourceapi.AllocatedDeviceStatus) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
	if results != nil {
		c.Status.Allocation = &resourceapi.AllocationResult{}
		for _, r := range results {
			c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results,
				resourceapi.DeviceRequestAllocationResult{Request: "net", Driver: r.Driver, Pool: r.Pool, Device: r.Device})
		}
	}
	c.Status.Devices = status
	return c
}

// Data is a status entry's data.
func Data(s string) *runtime.RawExtension { return &runtime.RawExtension{Raw: []byte(s)} }
