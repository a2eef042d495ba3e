package testbed

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/netclass-dev/netclass/test/repo"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// CRDFieldManager owns the CRDs the tests install.
const CRDFieldManager = "netclass-tests"

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// InstallCRDs server-side applies every CRD of the repository's conf/crd
// (like `kubectl apply -f conf/crd/`) and waits until each is established,
// so a test package never depends on another having installed them. The
// CRDs are left installed: other packages' tests use them too.
func InstallCRDs(ctx context.Context, rc *rest.Config) error {
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("dynamic client: %w", err)
	}
	crds, err := readCRDs()
	if err != nil {
		return err
	}
	for _, u := range crds {
		_, err := dyn.Resource(crdResource).Apply(ctx, u.GetName(), u, metav1.ApplyOptions{FieldManager: CRDFieldManager, Force: true})
		if err != nil {
			return fmt.Errorf("apply CRD %s: %w", u.GetName(), err)
		}
	}
	deadline := time.Now().Add(time.Minute)
	for _, u := range crds {
		for !established(ctx, dyn, u.GetName()) {
			if time.Now().After(deadline) {
				return fmt.Errorf("CRD %s not established after 1m", u.GetName())
			}
			time.Sleep(100 * time.Millisecond) // polling the API server for a condition, with a deadline
		}
	}
	return nil
}

func readCRDs() ([]*unstructured.Unstructured, error) {
	root, err := repo.Root()
	if err != nil {
		return nil, err
	}
	files, err := filepath.Glob(filepath.Join(root, "conf", "crd", "*.yaml"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no CRDs in conf/crd (%v)", err)
	}
	thirdParty, err := filepath.Glob(filepath.Join(root, "conf", "crd", "thirdparty", "*.yaml"))
	if err != nil {
		return nil, err
	}
	files = append(files, thirdParty...)
	var crds []*unstructured.Unstructured
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
		for {
			u := &unstructured.Unstructured{}
			if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return nil, fmt.Errorf("decode %s: %w", f, err)
			}
			if u.GetKind() == "CustomResourceDefinition" {
				crds = append(crds, u)
			}
		}
	}
	return crds, nil
}

func established(ctx context.Context, dyn dynamic.Interface, name string) bool {
	u, err := dyn.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}
