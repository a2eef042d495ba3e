// Package finalizer adds and removes netclass-controller's finalizer (contract.FinalizerInUse)
// on the network objects it holds while they are in use, with the events and logs every
// reconciler gives such a write.
package finalizer

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/netclass-dev/netclass/api/contract"
)

// Event reasons.
const (
	EventRemoved      = "FinalizerRemoved"
	EventUpdateFailed = "UpdateFailed"
)

// Object is a typed API object.
type Object interface {
	metav1.Object
	runtime.Object
}

// Writer updates one kind of object (its typed client's Update) and names it in errors.
type Writer[T Object] struct {
	Kind     string // lowercase, for errors: "network"
	Update   func(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
	Recorder record.EventRecorder
}

// Ensure adds the finalizer unless obj holds it; it returns the object as written.
func (w Writer[T]) Ensure(ctx context.Context, obj T, deepCopy func(T) T) (T, error) {
	if slices.Contains(obj.GetFinalizers(), contract.FinalizerInUse) {
		return obj, nil
	}
	upd := deepCopy(obj)
	upd.SetFinalizers(append(upd.GetFinalizers(), contract.FinalizerInUse))
	out, err := w.Update(ctx, upd, metav1.UpdateOptions{FieldManager: contract.FieldManager})
	if err != nil {
		w.Recorder.Eventf(obj, corev1.EventTypeWarning, EventUpdateFailed, "Adding finalizer %s failed: %v", contract.FinalizerInUse, err)
		var zero T
		return zero, fmt.Errorf("add finalizer to %s %s: %w", w.Kind, name(obj), err)
	}
	klog.FromContext(ctx).V(2).Info("Added finalizer", "finalizer", contract.FinalizerInUse)
	return out, nil
}

// Remove takes the finalizer off obj (gone already is fine).
func (w Writer[T]) Remove(ctx context.Context, obj T, deepCopy func(T) T) error {
	if !slices.Contains(obj.GetFinalizers(), contract.FinalizerInUse) {
		return nil
	}
	upd := deepCopy(obj)
	upd.SetFinalizers(slices.DeleteFunc(upd.GetFinalizers(), func(f string) bool { return f == contract.FinalizerInUse }))
	_, err := w.Update(ctx, upd, metav1.UpdateOptions{FieldManager: contract.FieldManager})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		w.Recorder.Eventf(obj, corev1.EventTypeWarning, EventUpdateFailed, "Removing finalizer %s failed: %v", contract.FinalizerInUse, err)
		return fmt.Errorf("remove finalizer from %s %s: %w", w.Kind, name(obj), err)
	}
	w.Recorder.Event(obj, corev1.EventTypeNormal, EventRemoved, "No ResourceClaim uses the network; deletion proceeds")
	return nil
}

func name(obj metav1.Object) string {
	if obj.GetNamespace() == "" {
		return obj.GetName()
	}
	return obj.GetNamespace() + "/" + obj.GetName()
}
