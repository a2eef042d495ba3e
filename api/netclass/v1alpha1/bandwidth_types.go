package v1alpha1

import "k8s.io/apimachinery/pkg/api/resource"

// AnnotationBandwidth, on a netclass.dev PodNetwork (whose spec has the
// proposal's fixed shape), declares the network's bandwidth capacity: its
// value is a NetworkBandwidth in JSON, for example
// {"capacity": "100M", "default": "10M", "min": "1M", "step": "1M"}.
const AnnotationBandwidth = "netclass.dev/bandwidth"

// NetworkBandwidth is the bandwidth a network offers on each node, shared by
// the pods attached to it there. netclass-dra publishes it as the device's
// DRA consumable capacity "bandwidth" with a request policy; the scheduler
// never allocates more than capacity on one node, and each attachment is
// shaped to what its claim was allocated. All values are bits per second
// (quantities such as "100M" or "1G"; whole bits).
//
// A claim that requests no bandwidth is allocated default. A request below
// min is rounded up to min, one between two steps up to the next step (min +
// n×step), and one above max cannot be allocated (the pod stays Pending, and
// the scheduler's event says why).
//
// +kubebuilder:validation:XValidation:rule="!has(self.min) || !has(self.max) || quantity(string(self.min)).compareTo(quantity(string(self.max))) <= 0",message="min must not exceed max"
// +kubebuilder:validation:XValidation:rule="!has(self.capacity) || !has(self.max) || quantity(string(self.max)).compareTo(quantity(string(self.capacity))) <= 0",message="max must not exceed capacity"
// +kubebuilder:validation:XValidation:rule="!has(self.capacity) || !has(self.min) || quantity(string(self.min)).compareTo(quantity(string(self.capacity))) <= 0",message="min must not exceed capacity"
type NetworkBandwidth struct {
	// capacity is the bandwidth, in bits per second, the network offers on
	// each node: the sum of the allocations of the claims attached to it
	// on one node never exceeds it. Required on a ClusterNetwork or a
	// PodNetwork; a Network inherits its ClusterNetwork's and may only
	// lower it.
	// +kubebuilder:validation:XValidation:rule="isQuantity(string(self)) && quantity(string(self)).isGreaterThan(quantity('0'))",message="capacity must be a positive quantity"
	// +optional
	Capacity *resource.Quantity `json:"capacity,omitempty"`

	// default is what a claim that requests no bandwidth is allocated.
	// Unset: min (no min: 0, that is a claim without a request is allocated
	// nothing and its pod is not shaped by netclass: a best-effort pod).
	// +kubebuilder:validation:XValidation:rule="isQuantity(string(self)) && !quantity(string(self)).isLessThan(quantity('0'))",message="default must not be negative"
	// +optional
	Default *resource.Quantity `json:"default,omitempty"`

	// min is the smallest allocation; smaller requests are rounded up to it.
	// Unset: 0.
	// +kubebuilder:validation:XValidation:rule="isQuantity(string(self)) && !quantity(string(self)).isLessThan(quantity('0'))",message="min must not be negative"
	// +optional
	Min *resource.Quantity `json:"min,omitempty"`

	// max is the largest allocation one claim may request. Unset: capacity.
	// +kubebuilder:validation:XValidation:rule="isQuantity(string(self)) && quantity(string(self)).isGreaterThan(quantity('0'))",message="max must be positive"
	// +optional
	Max *resource.Quantity `json:"max,omitempty"`

	// step is the granularity of allocations: min + n×step. Unset: any
	// amount between min and max.
	// +kubebuilder:validation:XValidation:rule="isQuantity(string(self)) && quantity(string(self)).isGreaterThan(quantity('0'))",message="step must be positive"
	// +optional
	Step *resource.Quantity `json:"step,omitempty"`

	// ceiling is the most one attachment may send through the network on a
	// node. Allocation (the default): its allocation, also when the network
	// is idle. Capacity: work-conserving sharing — an attachment may borrow
	// what the others leave unused, up to the capacity, and is still given
	// at least its allocation under congestion (on a netclass-vxlan network,
	// whose node scheduler shares the capacity among its attachments).
	// +kubebuilder:validation:Enum=Allocation;Capacity
	// +optional
	Ceiling BandwidthCeiling `json:"ceiling,omitempty"`
}

// BandwidthCeiling is how high an attachment's bandwidth may go.
type BandwidthCeiling string

// The ceilings of an attachment.
const (
	CeilingAllocation BandwidthCeiling = "Allocation"
	CeilingCapacity   BandwidthCeiling = "Capacity"
)
