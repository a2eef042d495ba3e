package crdschema

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// FieldManager is the field manager of every write the live tests make.
const FieldManager = "netclass-api-test"

var (
	crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	nsResource  = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
)

// Server runs cases against a real API server.
type Server struct {
	dyn  dynamic.Interface
	crds map[string]*CRD
}

// NewServer connects to the API server of cfg; crds maps kinds to the CRDs
// the cases use.
func NewServer(cfg *rest.Config, crds map[string]*CRD) (*Server, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("dynamic client: %w", err)
	}
	return &Server{dyn: dyn, crds: crds}, nil
}

// InstallCRDs server-side applies every CRD (so an older copy is brought up
// to date) and waits until each is established. The CRDs are left installed:
// other components' tests may be using them.
func (s *Server) InstallCRDs(ctx context.Context) error {
	for kind, c := range s.crds {
		data, err := json.Marshal(c.Definition)
		if err != nil {
			return fmt.Errorf("encode CRD of %s: %w", kind, err)
		}
		if _, err := s.dyn.Resource(crdResource).Apply(ctx, c.Definition.Name, mustUnstructured(data), metav1.ApplyOptions{FieldManager: FieldManager, Force: true}); err != nil {
			return fmt.Errorf("apply CRD %s: %w", c.Definition.Name, err)
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for _, c := range s.crds {
		for {
			u, err := s.dyn.Resource(crdResource).Get(ctx, c.Definition.Name, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("get CRD %s: %w", c.Definition.Name, err)
			}
			if crdEstablished(u) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("CRD %s not established after 60s", c.Definition.Name)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return nil
}

func mustUnstructured(data []byte) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(data); err != nil {
		panic(fmt.Sprintf("re-decoding an encoded CRD: %v", err))
	}
	return u
}

func crdEstablished(u *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	established, named := false, false
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["status"] != "True" {
			continue
		}
		switch m["type"] {
		case "Established":
			established = true
		case "NamesAccepted":
			named = true
		}
	}
	return established && named
}

func (s *Server) client(obj map[string]any) (dynamic.ResourceInterface, *CRD, error) {
	c, ok := s.crds[kindOf(obj)]
	if !ok {
		return nil, nil, fmt.Errorf("no CRD for kind %q", kindOf(obj))
	}
	gvr := schema.GroupVersionResource{Group: c.Definition.Spec.Group, Version: c.Definition.Spec.Versions[0].Name, Resource: c.Definition.Spec.Names.Plural}
	if c.Definition.Spec.Scope == "Namespaced" {
		ns, _, _ := unstructured.NestedString(obj, "metadata", "namespace")
		if ns == "" {
			ns = metav1.NamespaceDefault
		}
		return s.dyn.Resource(gvr).Namespace(ns), c, nil
	}
	return s.dyn.Resource(gvr), c, nil
}

// EnsureNamespace creates namespace ns unless it exists, and deletes it when
// the test ends if it created it.
func (s *Server) EnsureNamespace(t testing.TB, ns string) {
	t.Helper()
	ctx := context.Background()
	// A namespace being deleted (by an earlier run's cleanup) refuses new
	// objects: wait until it is gone.
	for deadline := time.Now().Add(2 * time.Minute); ; {
		u, err := s.dyn.Resource(nsResource).Get(ctx, ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		if err != nil {
			t.Fatalf("get namespace %s: %v", ns, err)
		}
		if phase, _, _ := unstructured.NestedString(u.Object, "status", "phase"); phase != "Terminating" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("namespace %s still terminating after 2m", ns)
		}
		time.Sleep(500 * time.Millisecond)
	}
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}}
	if _, err := s.dyn.Resource(nsResource).Create(ctx, u, metav1.CreateOptions{FieldManager: FieldManager}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace %s: %v", ns, err)
	}
	t.Cleanup(func() {
		if err := s.dyn.Resource(nsResource).Delete(context.Background(), ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete namespace %s: %v", ns, err)
		}
	})
}

// Create creates obj with strict field validation; dry-run leaves nothing
// behind and returns the object as it would be stored.
func (s *Server) Create(ctx context.Context, obj map[string]any, dryRun bool) (map[string]any, error) {
	rc, _, err := s.client(obj)
	if err != nil {
		return nil, err
	}
	opts := metav1.CreateOptions{FieldManager: FieldManager, FieldValidation: metav1.FieldValidationStrict}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	out, err := rc.Create(ctx, &unstructured.Unstructured{Object: obj}, opts)
	if err != nil {
		return nil, err
	}
	return out.Object, nil
}

// Delete deletes obj (by name) and ignores NotFound.
func (s *Server) Delete(ctx context.Context, obj map[string]any) error {
	rc, _, err := s.client(obj)
	if err != nil {
		return err
	}
	name, _, _ := unstructured.NestedString(obj, "metadata", "name")
	if err := rc.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete %s %s: %w", kindOf(obj), name, err)
	}
	return nil
}

// createFresh creates obj for real, first removing a leftover of an earlier
// interrupted run, and deletes it when the test ends.
func (s *Server) createFresh(t testing.TB, obj map[string]any) map[string]any {
	t.Helper()
	ctx := context.Background()
	for attempt := 0; ; attempt++ {
		out, err := s.Create(ctx, obj, false)
		if err == nil {
			t.Cleanup(func() {
				if err := s.Delete(context.Background(), out); err != nil {
					t.Errorf("cleanup: %v", err)
				}
			})
			return out
		}
		if !apierrors.IsAlreadyExists(err) || attempt >= 50 {
			t.Fatalf("create the old object: %v", err)
		}
		if attempt == 0 {
			if err := s.Delete(ctx, obj); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// update dry-runs an update of old to obj (main resource or status).
func (s *Server) update(ctx context.Context, old, obj map[string]any, status bool) (map[string]any, error) {
	rc, _, err := s.client(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetResourceVersion((&unstructured.Unstructured{Object: old}).GetResourceVersion())
	opts := metav1.UpdateOptions{FieldManager: FieldManager, FieldValidation: metav1.FieldValidationStrict, DryRun: []string{metav1.DryRunAll}}
	var out *unstructured.Unstructured
	if status {
		out, err = rc.UpdateStatus(ctx, u, opts)
	} else {
		out, err = rc.Update(ctx, u, opts)
	}
	if err != nil {
		return nil, err
	}
	return out.Object, nil
}

// Patch applies a JSON merge patch for real (used to set up state).
func (s *Server) Patch(ctx context.Context, obj map[string]any, patch []byte, subresources ...string) (map[string]any, error) {
	rc, _, err := s.client(obj)
	if err != nil {
		return nil, err
	}
	name, _, _ := unstructured.NestedString(obj, "metadata", "name")
	out, err := rc.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager}, subresources...)
	if err != nil {
		return nil, err
	}
	return out.Object, nil
}

// RunLive runs the cases against the API server: creates are dry-run; for
// updates the old object is created for real, the update is dry-run and the
// object deleted afterwards.
func RunLive(t *testing.T, s *Server, cases []Case) {
	t.Helper()
	// Namespaces are made once for all cases: one deleted after a case
	// would still be terminating when the next needs it.
	namespaces := map[string]bool{}
	for _, tc := range cases {
		for _, y := range []string{tc.Old, tc.Obj} {
			if obj, err := ParseObject(y); err == nil {
				if ns, _, _ := unstructured.NestedString(obj, "metadata", "namespace"); ns != "" && !namespaces[ns] {
					namespaces[ns] = true
					s.EnsureNamespace(t, ns)
				}
			}
		}
	}
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			obj, err := ParseObject(tc.Obj)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			var stored map[string]any
			if tc.Old == "" {
				stored, err = s.Create(ctx, obj, true)
			} else {
				oldObj, perr := ParseObject(tc.Old)
				if perr != nil {
					t.Fatal(perr)
				}
				created := s.createFresh(t, oldObj)
				stored, err = s.update(ctx, created, obj, tc.Status)
			}
			msg := ""
			if err != nil {
				var status apierrors.APIStatus
				if !errors.As(err, &status) || status.Status().Code >= 500 || apierrors.IsNotFound(err) {
					t.Fatalf("request failed for another reason than validation: %v", err)
				}
				msg = err.Error()
			}
			checkOutcome(t, tc, err != nil, strings.TrimSpace(msg), stored)
		})
	}
}
