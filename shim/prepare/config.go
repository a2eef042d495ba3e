package prepare

import (
	"bytes"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/netclass-dev/netclass/api/contract"
	"github.com/netclass-dev/netclass/shim/attachment"
)

// OpaqueConfig merges the opaque configurations of driver netclass.dev that
// the claim's allocation applies to a request: the DeviceClass's first, then
// the claim's, later entries overriding earlier ones. It returns nil when
// there is none.
func OpaqueConfig(claim *resourceapi.ResourceClaim, request string) (*contract.AttachmentConfig, error) {
	if claim.Status.Allocation == nil {
		return nil, nil
	}
	ordered := append([]resourceapi.DeviceAllocationConfiguration(nil), claim.Status.Allocation.Devices.Config...)
	sort.SliceStable(ordered, func(i, j int) bool {
		return ordered[i].Source == resourceapi.AllocationConfigSourceClass && ordered[j].Source != resourceapi.AllocationConfigSourceClass
	})
	var merged *contract.AttachmentConfig
	for _, c := range ordered {
		if c.Opaque == nil || c.Opaque.Driver != contract.DriverName || !appliesTo(c.Requests, request) {
			continue
		}
		cfg, err := attachment.ParseConfig(c.Opaque.Parameters.Raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", written(claim.Spec.Devices.Config, c), err)
		}
		merged = attachment.Merge(merged, cfg)
	}
	return merged, nil
}

// written names where the user wrote an allocated configuration: the claim's
// spec.devices.config[k] (the allocation copies only the entries that apply,
// and clears the requests of those applying to all, so its index is not the
// claim's: the entry is found by its parameters), or the DeviceClass.
func written(spec []resourceapi.DeviceClaimConfiguration, c resourceapi.DeviceAllocationConfiguration) string {
	if c.Source == resourceapi.AllocationConfigSourceClass {
		return "the DeviceClass's opaque configuration"
	}
	for k, s := range spec {
		if s.Opaque != nil && s.Opaque.Driver == c.Opaque.Driver && bytes.Equal(s.Opaque.Parameters.Raw, c.Opaque.Parameters.Raw) {
			return fmt.Sprintf("spec.devices.config[%d].opaque.parameters", k)
		}
	}
	return "the claim's opaque configuration"
}

// appliesTo: no requests means all; a request "r" also covers its subrequests "r/s".
func appliesTo(requests []string, request string) bool {
	if len(requests) == 0 {
		return true
	}
	parent, _, _ := strings.Cut(request, "/")
	for _, r := range requests {
		if r == request || r == parent {
			return true
		}
	}
	return false
}

// ClaimOrder is the position of the claim in the pod's spec.resourceClaims
// (resolving claims generated from templates through the pod's status), or
// len(spec.resourceClaims) when the pod does not list it.
func ClaimOrder(pod *corev1.Pod, claimName string) int {
	generated := map[string]string{}
	for _, s := range pod.Status.ResourceClaimStatuses {
		if s.ResourceClaimName != nil {
			generated[s.Name] = *s.ResourceClaimName
		}
	}
	for i, rc := range pod.Spec.ResourceClaims {
		if rc.ResourceClaimName != nil && *rc.ResourceClaimName == claimName {
			return i
		}
		if generated[rc.Name] == claimName {
			return i
		}
	}
	return len(pod.Spec.ResourceClaims)
}
