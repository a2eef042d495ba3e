// Package bandwidth resolves a network's bandwidth capacity — the
// ClusterNetwork's and Network's spec.bandwidth, or a PodNetwork's
// netclass.dev/bandwidth annotation — into a validated Policy in bits per
// second: what netclass-dra publishes as the device's DRA consumable
// capacity "bandwidth" and its request policy. It mirrors the API server's
// own validation of a request policy (k8s.io/kubernetes
// pkg/apis/resource/validation, validateRequestPolicyRange), so that a
// network it accepts never makes the node's ResourceSlice invalid. It is pure.
package bandwidth

import (
	"fmt"
	"math"

	"k8s.io/apimachinery/pkg/api/resource"

	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/conf/field"
	"github.com/netclass-dev/netclass/conf/strictjson"
)

// Policy is a network's bandwidth on each node, in bits per second.
type Policy struct {
	// Capacity is what the claims attached on one node share.
	Capacity int64
	// Default is what a claim without a request is allocated.
	Default int64
	// Min and Max bound one claim's allocation; Step (0: none) is its
	// granularity from Min.
	Min, Max, Step int64
	// Ceiling is an attachment's ceiling: ncv1.CeilingAllocation (or
	// "", the same) or ncv1.CeilingCapacity.
	Ceiling ncv1.BandwidthCeiling
}

// CeilingOf is the most an attachment allocated allocated bits/s may send:
// its allocation, or the capacity with a work-conserving Ceiling (0 for an
// attachment allocated nothing: a best-effort one, which no ceiling caps).
func (pol *Policy) CeilingOf(allocated int64) int64 {
	if pol == nil || allocated <= 0 || pol.Ceiling != ncv1.CeilingCapacity {
		return allocated
	}
	return max(pol.Capacity, allocated)
}

// Merge is a Network's bandwidth: its ClusterNetwork's with the Network's
// own fields over it (nil when neither sets one).
func Merge(cluster, own *ncv1.NetworkBandwidth) *ncv1.NetworkBandwidth {
	if cluster == nil && own == nil {
		return nil
	}
	out := &ncv1.NetworkBandwidth{}
	if cluster != nil {
		out = cluster.DeepCopy()
	}
	if own == nil {
		return out
	}
	for _, f := range []struct{ dst, src **resource.Quantity }{
		{&out.Capacity, &own.Capacity}, {&out.Default, &own.Default}, {&out.Min, &own.Min},
		{&out.Max, &own.Max}, {&out.Step, &own.Step},
	} {
		if *f.src != nil {
			q := (*f.src).DeepCopy()
			*f.dst = &q
		}
	}
	if own.Ceiling != "" {
		out.Ceiling = own.Ceiling
	}
	return out
}

// ForNetwork is the policy of a Network under its ClusterNetwork (nil when
// neither declares a bandwidth). A Network may lower its ClusterNetwork's
// capacity, never raise it: its pods share the admin's uplink.
func ForNetwork(n *ncv1.Network, cn *ncv1.ClusterNetwork) (*Policy, error) {
	p := field.Path("spec.bandwidth")
	var errs field.Errors
	cluster, own := cn.Spec.Bandwidth, n.Spec.Bandwidth
	if cluster != nil && cluster.Capacity != nil && own != nil && own.Capacity != nil && own.Capacity.Cmp(*cluster.Capacity) > 0 {
		errs.Add(p.Child("capacity"), "%s exceeds the capacity of ClusterNetwork %s (%s): a Network may only lower it",
			own.Capacity, cn.Name, cluster.Capacity)
	}
	pol, err := Resolve(Merge(cluster, own), p)
	errs.Append(err)
	if err := errs.Err(); err != nil {
		return nil, fmt.Errorf("bandwidth of Network %s/%s: %w", n.Namespace, n.Name, err)
	}
	return pol, nil
}

// annotationPath names the annotation in errors.
const annotationPath = field.Path("metadata.annotations[" + ncv1.AnnotationBandwidth + "]")

// ForPodNetwork is the policy a PodNetwork's annotation
// ncv1.AnnotationBandwidth declares (nil when it has none).
func ForPodNetwork(annotations map[string]string) (*Policy, error) {
	raw, ok := annotations[ncv1.AnnotationBandwidth]
	if !ok {
		return nil, nil
	}
	return ParseAnnotation(raw)
}

// ParseAnnotation parses and validates the value of the annotation: a
// NetworkBandwidth in JSON, unknown fields refused.
func ParseAnnotation(raw string) (*Policy, error) {
	var b ncv1.NetworkBandwidth
	if err := strictjson.Decode([]byte(raw), &b); err != nil {
		return nil, field.Invalid(annotationPath, "not a bandwidth object (%s): %v", `{"capacity": "100M", "default": "10M", "min": "1M", "max": "50M", "step": "1M"}`, err)
	}
	return Resolve(&b, annotationPath)
}

// Resolve validates b (every problem, each with its field path under p) and
// fills in the defaults: max = capacity, min = 0, default = min. nil: none.
func Resolve(b *ncv1.NetworkBandwidth, p field.Path) (*Policy, error) {
	if b == nil {
		return nil, nil
	}
	var errs field.Errors
	if b.Capacity == nil {
		errs.Add(p.Child("capacity"), "is required")
	}
	capacity := bits(&errs, p.Child("capacity"), b.Capacity, 0)
	pol := &Policy{
		Capacity: capacity,
		Min:      bits(&errs, p.Child("min"), b.Min, 0),
		Max:      bits(&errs, p.Child("max"), b.Max, capacity),
		Step:     bits(&errs, p.Child("step"), b.Step, 0),
		Ceiling:  b.Ceiling,
	}
	pol.Default = bits(&errs, p.Child("default"), b.Default, pol.Min)
	if b.Step != nil && b.Step.Sign() == 0 {
		errs.Add(p.Child("step"), "must be positive (leave it out for none)")
	}
	if len(errs) > 0 {
		return nil, errs.Err()
	}
	if err := pol.Validate(p); err != nil {
		return nil, err
	}
	return pol, nil
}

// bits reads a quantity of whole bits per second (fallback when unset).
func bits(errs *field.Errors, p field.Path, q *resource.Quantity, fallback int64) int64 {
	switch {
	case q == nil:
		return fallback
	case q.Sign() < 0:
		errs.Add(p, "must not be negative, got %s", q)
	case q.CmpInt64(math.MaxInt64) > 0:
		errs.Add(p, "must be at most %d bits/s, got %s", int64(math.MaxInt64), q)
	case !whole(q):
		errs.Add(p, "must be a whole number of bits/s, got %s", q)
	default:
		return q.Value()
	}
	return 0
}

// whole reports whether q, at most MaxInt64, is a whole number (its
// MilliValue overflows above ~9.2e15, which bits/s may exceed).
func whole(q *resource.Quantity) bool {
	_, ok := q.AsInt64() // false: it has a fraction
	return ok
}

// Validate checks the policy as the API server checks a device's capacity
// and request policy (every problem, each with its field path under p).
func (pol *Policy) Validate(p field.Path) error {
	var errs field.Errors
	if pol.Capacity <= 0 {
		errs.Add(p.Child("capacity"), "must be positive, got %d", pol.Capacity)
	}
	if pol.Max <= 0 {
		errs.Add(p.Child("max"), "must be positive, got %d", pol.Max)
	}
	if pol.Max > pol.Capacity {
		errs.Add(p.Child("max"), "%d exceeds the capacity %d", pol.Max, pol.Capacity)
	}
	if pol.Min > pol.Max {
		errs.Add(p.Child("min"), "%d exceeds max %d", pol.Min, pol.Max)
	}
	if pol.Default < pol.Min || pol.Default > pol.Max {
		errs.Add(p.Child("default"), "%d is outside [min %d, max %d]", pol.Default, pol.Min, pol.Max)
	}
	errs.Append(pol.validateStep(p)...)
	if pol.Ceiling != "" && pol.Ceiling != ncv1.CeilingAllocation && pol.Ceiling != ncv1.CeilingCapacity {
		errs.Add(p.Child("ceiling"), "must be %s or %s, got %q", ncv1.CeilingAllocation, ncv1.CeilingCapacity, pol.Ceiling)
	}
	return errs.Err()
}

func (pol *Policy) validateStep(p field.Path) []error {
	var errs field.Errors
	switch {
	case pol.Step == 0:
	case pol.Step < 0:
		errs.Add(p.Child("step"), "must be positive, got %d", pol.Step)
	case pol.Min > pol.Capacity-pol.Step:
		errs.Add(p.Child("step"), "min %d plus one step %d exceeds the capacity %d", pol.Min, pol.Step, pol.Capacity)
	default:
		if (pol.Default-pol.Min)%pol.Step != 0 {
			errs.Add(p.Child("default"), "%d is not min %d plus a multiple of step %d", pol.Default, pol.Min, pol.Step)
		}
		if (pol.Max-pol.Min)%pol.Step != 0 {
			errs.Add(p.Child("max"), "%d is not min %d plus a multiple of step %d", pol.Max, pol.Min, pol.Step)
		}
	}
	return errs
}

// Quantity renders bits per second as a decimal quantity ("30M").
func Quantity(v int64) resource.Quantity { return *resource.NewQuantity(v, resource.DecimalSI) }
