package prepare

import (
	"context"
	"errors"
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Claims reads a ResourceClaim by name.
type Claims interface {
	Claim(ctx context.Context, namespace, name string) (*resourceapi.ResourceClaim, error)
}

// JoinShared records a pod that starts with a ResourceClaim already prepared
// on the node for other pods: the kubelet prepares a claim once per node, so
// a pod that joins a shared claim later is never named to Prepare, and would
// start without its interface. Called as the pod's sandbox starts, before
// its attachments are planned; it costs a cache read for a pod that names no
// ResourceClaim itself (claims from templates are never shared), and an API
// read per claim it names.
func (p *Plugin) JoinShared(ctx context.Context, pod types.NamespacedName, uid types.UID) error {
	if p.Claims == nil {
		return nil
	}
	obj, err := p.Pods.Pod(ctx, pod.Namespace, pod.Name)
	if err != nil || obj.UID != uid {
		return nil // not ours to say: a pod the node cannot read has no claim of ours prepared for it either
	}
	var errs []error
	for _, rc := range obj.Spec.ResourceClaims {
		if rc.ResourceClaimName == nil {
			continue
		}
		claim, err := p.Claims.Claim(ctx, pod.Namespace, *rc.ResourceClaimName)
		if err != nil {
			errs = append(errs, fmt.Errorf("read claim %s/%s of pod %s: %w", pod.Namespace, *rc.ResourceClaimName, pod.Name, err))
			continue
		}
		rec, ok := p.Store.Get(claim.UID)
		if !ok || rec.HasPod(uid) || !reserves(claim, uid) {
			continue
		}
		errs = append(errs, p.refreshPods(ctx, claim, rec))
	}
	return errors.Join(errs...)
}

// reserves reports whether the claim is reserved for the pod.
func reserves(claim *resourceapi.ResourceClaim, uid types.UID) bool {
	for _, r := range claim.Status.ReservedFor {
		if r.Resource == "pods" && r.APIGroup == "" && r.UID == uid {
			return true
		}
	}
	return false
}
