package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/netclass-dev/netclass/test/repo"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
)

// fieldManager owns what the harness applies.
const fieldManager = "netclass-e2e"

// Applied is an object the harness created (and so deletes at the end).
type Applied struct {
	Kind, Name string
	res        dynamic.ResourceInterface
}

// ApplyFile server-side-applies every document of a file of the repository,
// after mutate (when not nil) changed it, and returns the objects that did
// not exist before.
func (e *Env) ApplyFile(ctx context.Context, path string, mutate func(*unstructured.Unstructured) error) ([]Applied, error) {
	root, err := repo.Root()
	if err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		return nil, err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(e.Kube.Discovery()))
	dyn, err := dynamic.NewForConfig(e.Rest)
	if err != nil {
		return nil, err
	}
	var created []Applied
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return created, nil
			}
			return created, fmt.Errorf("decode %s: %w", path, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if mutate != nil {
			if err := mutate(u); err != nil {
				return created, fmt.Errorf("%s: %s %s: %w", path, u.GetKind(), u.GetName(), err)
			}
		}
		a, isNew, err := applyOne(ctx, mapper, dyn, u)
		if err != nil {
			return created, fmt.Errorf("%s: %w", path, err)
		}
		if isNew {
			created = append(created, a)
		}
	}
}

func applyOne(ctx context.Context, mapper meta.RESTMapper, dyn dynamic.Interface, u *unstructured.Unstructured) (Applied, bool, error) {
	gvk := u.GroupVersionKind()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return Applied{}, false, fmt.Errorf("map %v: %w", gvk, err)
	}
	var res dynamic.ResourceInterface = dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		res = dyn.Resource(m.Resource).Namespace(u.GetNamespace())
	}
	_, err = res.Get(ctx, u.GetName(), metav1.GetOptions{})
	isNew := apierrors.IsNotFound(err)
	if err != nil && !isNew {
		return Applied{}, false, fmt.Errorf("get %s %s: %w", gvk.Kind, u.GetName(), err)
	}
	data, err := json.Marshal(u.Object)
	if err != nil {
		return Applied{}, false, err
	}
	force := true
	if _, err := res.Patch(ctx, u.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{FieldManager: fieldManager, Force: &force}); err != nil {
		return Applied{}, false, fmt.Errorf("apply %s %s: %w", gvk.Kind, u.GetName(), err)
	}
	return Applied{Kind: gvk.Kind, Name: u.GetName(), res: res}, isNew, nil
}

// DeleteApplied deletes what the harness created, newest first.
func DeleteApplied(objs []Applied) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var errs []error
	for i := len(objs) - 1; i >= 0; i-- {
		o := objs[i]
		if err := o.res.Delete(ctx, o.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete %s %s: %w", o.Kind, o.Name, err))
		}
	}
	return errors.Join(errs...)
}
