package publish

import (
	"context"
	"errors"
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
)

// SliceAPI is what the sweep needs from the API server.
type SliceAPI interface {
	// Slices lists the ResourceSlices of a driver.
	Slices(ctx context.Context, driver string) ([]resourceapi.ResourceSlice, error)
	// NodeExists reports whether a Node object of that name exists.
	NodeExists(ctx context.Context, name string) (bool, error)
	// DeleteSlice deletes a ResourceSlice; a missing one is no error.
	DeleteSlice(ctx context.Context, name string) error
}

// SweepDeparted deletes the driver's ResourceSlices of nodes that no longer
// exist (normally the garbage collector removes them through their Node owner
// reference; this covers slices whose owner reference was lost or never
// resolved). It returns the names it deleted.
func SweepDeparted(ctx context.Context, api SliceAPI, driver string) ([]string, error) {
	slices, err := api.Slices(ctx, driver)
	if err != nil {
		return nil, fmt.Errorf("list ResourceSlices of driver %s: %w", driver, err)
	}
	exists := map[string]bool{}
	var deleted []string
	var errs []error
	for _, s := range slices {
		node := ""
		if s.Spec.NodeName != nil {
			node = *s.Spec.NodeName
		}
		if s.Spec.Driver != driver || node == "" {
			continue
		}
		there, seen := exists[node]
		if !seen {
			if there, err = api.NodeExists(ctx, node); err != nil {
				errs = append(errs, fmt.Errorf("get Node %s: %w", node, err))
				continue
			}
			exists[node] = there
		}
		if there {
			continue
		}
		if err := api.DeleteSlice(ctx, s.Name); err != nil {
			errs = append(errs, fmt.Errorf("delete ResourceSlice %s of departed node %s: %w", s.Name, node, err))
			continue
		}
		deleted = append(deleted, s.Name)
	}
	return deleted, errors.Join(errs...)
}

// ClientSliceAPI implements SliceAPI with a clientset.
type ClientSliceAPI struct{ Client kubernetes.Interface }

// Slices lists the driver's slices with a field selector.
func (c ClientSliceAPI) Slices(ctx context.Context, driver string) ([]resourceapi.ResourceSlice, error) {
	list, err := c.Client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector(resourceapi.ResourceSliceSelectorDriver, driver).String(),
	})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// NodeExists gets the Node.
func (c ClientSliceAPI) NodeExists(ctx context.Context, name string) (bool, error) {
	_, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}

// DeleteSlice deletes one slice.
func (c ClientSliceAPI) DeleteSlice(ctx context.Context, name string) error {
	err := c.Client.ResourceV1().ResourceSlices().Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
