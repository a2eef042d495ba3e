package nad

import (
	"context"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2"

	"github.com/netclass-dev/netclass/api/contract"
)

func cut(key string) (ns, name string, namespaced bool) {
	ns, name, namespaced = strings.Cut(key, "/")
	if !namespaced {
		return "", key, false
	}
	return ns, name, true
}

// ensure creates or updates the NAD d calls for; have is the generated NAD
// of its name, if any. A NAD of the name that netclass did not make is left
// alone, and the network told.
func (c *Controller) ensure(ctx context.Context, d Desired, have *unstructured.Unstructured) error {
	res := c.dyn.Resource(GVR).Namespace(d.Namespace)
	if have == nil {
		_, err := res.Create(ctx, Object(d), metav1.CreateOptions{FieldManager: contract.FieldManager})
		if apierrors.IsAlreadyExists(err) {
			c.event(d.Network, EventNotOwned, fmt.Sprintf("NetworkAttachmentDefinition %s exists and was not made by netclass (no label %s=%s): left alone, no NAD generated", d.Key(), LabelManagedBy, ManagedBy))
			return nil
		}
		if err != nil {
			return fmt.Errorf("create NetworkAttachmentDefinition %s: %w", d.Key(), err)
		}
		klog.FromContext(ctx).Info("Created NetworkAttachmentDefinition", "nad", klog.KRef(d.Namespace, d.Name), "network", d.Network)
		return nil
	}
	if have.GetDeletionTimestamp() != nil {
		return c.finalize(ctx, have) // deleted by hand or by the garbage collector: made again once gone
	}
	if have.GetAnnotations()[AnnotationNetwork] != d.Network {
		c.event(d.Network, EventNotOwned, fmt.Sprintf("NetworkAttachmentDefinition %s is netclass's NAD of network %s: left alone", d.Key(), have.GetAnnotations()[AnnotationNetwork]))
		return nil
	}
	if Current(have, d) {
		return nil
	}
	want := Object(d)
	want.SetResourceVersion(have.GetResourceVersion())
	if _, err := res.Update(ctx, want, metav1.UpdateOptions{FieldManager: contract.FieldManager}); err != nil {
		return fmt.Errorf("update NetworkAttachmentDefinition %s: %w", d.Key(), err)
	}
	klog.FromContext(ctx).Info("Updated NetworkAttachmentDefinition", "nad", klog.KRef(d.Namespace, d.Name), "network", d.Network)
	return nil
}

// retire deletes a generated NAD no network wants any more, and lets it go
// once no pod names it.
func (c *Controller) retire(ctx context.Context, u *unstructured.Unstructured) error {
	if u.GetDeletionTimestamp() == nil {
		err := c.dyn.Resource(GVR).Namespace(u.GetNamespace()).Delete(ctx, u.GetName(), metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: ptr(u.GetUID())}})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete NetworkAttachmentDefinition %s/%s: %w", u.GetNamespace(), u.GetName(), err)
		}
		klog.FromContext(ctx).Info("Deleting NetworkAttachmentDefinition: its network no longer calls for it", "nad", klog.KObj(u))
	}
	return c.finalize(ctx, u)
}

// finalize removes the finalizer of a deleting generated NAD once no pod
// names it.
func (c *Controller) finalize(ctx context.Context, u *unstructured.Unstructured) error {
	if !hasFinalizer(u) {
		return nil
	}
	used, err := c.inUse(u)
	if err != nil || used {
		return err
	}
	res := c.dyn.Resource(GVR).Namespace(u.GetNamespace())
	cur, err := res.Get(ctx, u.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get NetworkAttachmentDefinition %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	cur.SetFinalizers(slices.DeleteFunc(cur.GetFinalizers(), func(f string) bool { return f == Finalizer }))
	if _, err := res.Update(ctx, cur, metav1.UpdateOptions{FieldManager: contract.FieldManager}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("release NetworkAttachmentDefinition %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	klog.FromContext(ctx).Info("NetworkAttachmentDefinition released: no pod names it", "nad", klog.KObj(u))
	c.Trigger() // it goes: the next sync tells its network
	return nil
}

func ptr[T any](v T) *T { return &v }
