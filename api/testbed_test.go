//go:build testbed

package api_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/netclass-dev/netclass/api/internal/crdschema"
	"github.com/netclass-dev/netclass/test/testbed"
)

// TestLiveExamples dry-run creates every example and seed manifest with
// strict field validation on the test bed's API server.
func TestLiveExamples(t *testing.T) {
	s, err := crdschema.NewServer(testbed.RestConfig(t), crdschema.LoadRepo(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.InstallCRDs(testbed.Context(t, 2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	files := map[string][]crdschema.Doc{}
	namespaces := map[string]bool{}
	for _, file := range exampleFiles(t) {
		docs, err := crdschema.ReadDocs(file)
		if err != nil {
			t.Fatal(err)
		}
		files[file] = docs
		for _, doc := range docs {
			if ns, _, _ := unstructured.NestedString(doc.Object, "metadata", "namespace"); ns != "" && !namespaces[ns] {
				namespaces[ns] = true
				s.EnsureNamespace(t, ns)
			}
		}
	}
	for _, file := range exampleFiles(t) {
		for i, doc := range files[file] {
			t.Run(filepath.Base(file)+"/"+strconv.Itoa(i), func(t *testing.T) {
				stored, err := s.Create(context.Background(), doc.Object, true)
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				want, _ := json.Marshal(clean(doc.Object["spec"]))
				got, _ := json.Marshal(clean(stored["spec"]))
				// Defaults may add fields; every field written must be stored as written.
				if !containsJSON(t, got, want) {
					t.Fatalf("stored spec %s lost fields of %s", got, want)
				}
			})
		}
	}
}

// containsJSON reports whether every field of want is in got with the same value.
func containsJSON(t *testing.T, got, want []byte) bool {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatal(err)
	}
	return contains(g, w)
}

func contains(g, w any) bool {
	switch w := w.(type) {
	case map[string]any:
		gm, ok := g.(map[string]any)
		if !ok {
			return false
		}
		for k, v := range w {
			if !contains(gm[k], v) {
				return false
			}
		}
		return true
	case []any:
		gl, ok := g.([]any)
		if !ok || len(gl) != len(w) {
			return false
		}
		for i := range w {
			if !contains(gl[i], w[i]) {
				return false
			}
		}
		return true
	default:
		return g == w
	}
}

// TestLiveApprovalAnnotationRequired shows on the real API server what the
// annotation is for: the PodNetwork CRD without it is refused.
func TestLiveApprovalAnnotationRequired(t *testing.T) {
	c := crdschema.LoadRepo(t)["PodNetwork"]
	stripped, err := c.WithoutAnnotation(approvalAnnotation)
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(stripped.Definition)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(data); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(testbed.RestConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	crds := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	_, err = dyn.Resource(crds).Create(testbed.Context(t, time.Minute), u, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), approvalAnnotation) {
		t.Fatalf("dry-run create without %s: %v, want Invalid naming the annotation", approvalAnnotation, err)
	}
}
