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
// read only for a claim it names that is prepared on the node for other
// pods but not yet for it: a claim of another driver, or one prepared for
// the pod, is never read (nor can it fail the pod's start).
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
		if rc.ResourceClaimName != nil {
			errs = append(errs, p.join(ctx, pod, uid, *rc.ResourceClaimName))
		}
	}
	return errors.Join(errs...)
}

// join records the pod on the node's record of the named claim, when the
// claim is reserved for it and the record does not name it yet.
func (p *Plugin) join(ctx context.Context, pod types.NamespacedName, uid types.UID, name string) error {
	if !p.mayJoin(pod.Namespace, name, uid) {
		return nil
	}
	claim, err := p.Claims.Claim(ctx, pod.Namespace, name)
	if err != nil {
		return fmt.Errorf("read claim %s/%s of pod %s: %w", pod.Namespace, name, pod.Name, err)
	}
	rec, ok := p.Store.Get(claim.UID) // a claim recreated under the name has another UID, and no record
	if !ok || rec.HasPod(uid) || !reserves(claim, uid) {
		return nil
	}
	return p.refreshPods(ctx, claim, rec)
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

// mayJoin reports whether a record of the named claim on the node does not
// name the pod yet (one of two, when the claim was created again under its
// name while the old one's record is still here).
func (p *Plugin) mayJoin(namespace, name string, pod types.UID) bool {
	for _, u := range p.Store.Prepared(namespace, name) {
		if rec, ok := p.Store.Get(u); ok && !rec.HasPod(pod) {
			return true
		}
	}
	return false
}
