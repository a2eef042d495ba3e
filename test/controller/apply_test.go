//go:build testbed

package controller_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/netclass-dev/netclass/test/testbed"
)

// fieldManager owns what the tests apply.
const fieldManager = "netclass-controller-testbed"

// applier server-side-applies YAML documents through the dynamic client.
type applier struct {
	dyn    dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
}

func newApplier(t *testing.T, cfg *rest.Config) *applier {
	t.Helper()
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	disc := testbed.Client(t).Discovery()
	return &applier{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))}
}

// repoPath is a path relative to the repository root.
func repoPath(p string) string { return filepath.Join("..", "..", p) }

// readDocs returns the YAML documents of a file as unstructured objects.
func readDocs(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	raw, err := os.ReadFile(repoPath(path))
	if err != nil {
		t.Fatal(err)
	}
	var out []*unstructured.Unstructured
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		var obj map[string]any
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(obj) > 0 {
			out = append(out, &unstructured.Unstructured{Object: obj})
		}
	}
}

func (a *applier) resource(t *testing.T, u *unstructured.Unstructured) dynamic.ResourceInterface {
	t.Helper()
	gvk := u.GroupVersionKind()
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		a.mapper.Reset()
		m, err = a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		t.Fatalf("no resource for %s: %v", gvk, err)
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return a.dyn.Resource(m.Resource).Namespace(u.GetNamespace())
	}
	return a.dyn.Resource(m.Resource)
}

// apply server-side-applies u. Objects that did not exist before are deleted when the test
// ends (and waited for), so cluster-scoped objects never outlive it, unless keep is set
// (the CRDs, which other engineers' tests use concurrently).
func (a *applier) apply(t *testing.T, ctx context.Context, u *unstructured.Unstructured, keep bool) {
	t.Helper()
	ri := a.resource(t, u)
	_, err := ri.Get(ctx, u.GetName(), metav1.GetOptions{})
	existed := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("get %s %s: %v", u.GetKind(), u.GetName(), err)
	}
	data, err := json.Marshal(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ri.Patch(ctx, u.GetName(), "application/apply-patch+yaml", data, metav1.PatchOptions{FieldManager: fieldManager, Force: ptr(true)}); err != nil {
		t.Fatalf("apply %s %s: %v", u.GetKind(), u.GetName(), err)
	}
	if existed || keep {
		return
	}
	name, kind := u.GetName(), u.GetKind()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := ri.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete %s %s: %v", kind, name, err)
			return
		}
		for {
			if _, err := ri.Get(ctx, name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
				return
			}
			select {
			case <-ctx.Done():
				t.Errorf("%s %s still there after a minute", kind, name)
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	})
}

// applyFile applies every document of a file (relative to the repository root).
func (a *applier) applyFile(t *testing.T, ctx context.Context, path string) {
	t.Helper()
	for _, u := range readDocs(t, path) {
		a.apply(t, ctx, u, false)
	}
}

func ptr[T any](v T) *T { return &v }
