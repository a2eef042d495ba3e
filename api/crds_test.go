package api_test

import (
	"encoding/json"
	"slices"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/netclass-dev/netclass/api/internal/crdschema"
)

const approvalAnnotation = "api-approved.kubernetes.io"

// TestCRDManifests checks that conf/crd holds exactly the six CRDs, each with
// the group, version, scope, names, subresource and annotation it must have,
// and that the API server's own CRD validation (structural schema, CEL
// compilation and cost limits) accepts it.
func TestCRDManifests(t *testing.T) {
	crds := crdschema.LoadRepo(t)
	tests := []struct {
		kind, group, version, plural string
		scope                        apiextensionsv1.ResourceScope
		needsApproval                bool
		columns                      []string
	}{
		{"NetworkClass", "multinetwork.networking.k8s.io", "v1", "networkclasses", apiextensionsv1.ClusterScoped, true, []string{"Group", "Kind", "Age"}},
		{"PodNetwork", "multinetwork.networking.k8s.io", "v1", "podnetworks", apiextensionsv1.ClusterScoped, true, []string{"Provider", "Enabled", "Ready", "InUse", "Age"}},
		{"ClusterNetwork", "netclass.dev", "v1alpha1", "clusternetworks", apiextensionsv1.ClusterScoped, false, []string{"Type", "Ready Nodes", "Ready", "Age"}},
		{"NodeNetwork", "netclass.dev", "v1alpha1", "nodenetworks", apiextensionsv1.ClusterScoped, false, []string{"Cluster Network", "Node", "Ready", "Age"}},
		{"Network", "netclass.dev", "v1alpha1", "networks", apiextensionsv1.NamespaceScoped, false, []string{"Cluster Network", "VLAN", "VNI", "Ready", "Age"}},
		{"NetworkQoS", "netclass.dev", "v1alpha1", "networkqoses", apiextensionsv1.NamespaceScoped, false, []string{"Priority", "Status", "Age"}},
	}
	if len(crds) != len(tests) {
		var kinds []string
		for k := range crds {
			kinds = append(kinds, k)
		}
		t.Errorf("conf/crd holds %d CRDs %v, want %d", len(crds), kinds, len(tests))
	}
	for _, tc := range tests {
		t.Run(tc.kind, func(t *testing.T) {
			c, ok := crds[tc.kind]
			if !ok {
				t.Fatalf("no CRD for %s in conf/crd", tc.kind)
			}
			d := c.Definition
			if d.Spec.Group != tc.group || d.Spec.Names.Plural != tc.plural || d.Name != tc.plural+"."+tc.group {
				t.Errorf("group/plural/name = %s/%s/%s, want %s/%s/%s.%s", d.Spec.Group, d.Spec.Names.Plural, d.Name, tc.group, tc.plural, tc.plural, tc.group)
			}
			if d.Spec.Scope != tc.scope {
				t.Errorf("scope = %s, want %s", d.Spec.Scope, tc.scope)
			}
			if len(d.Spec.Versions) != 1 || d.Spec.Versions[0].Name != tc.version || !d.Spec.Versions[0].Served || !d.Spec.Versions[0].Storage {
				t.Fatalf("versions = %+v, want one served storage version %s", d.Spec.Versions, tc.version)
			}
			v := d.Spec.Versions[0]
			if v.Subresources == nil || v.Subresources.Status == nil {
				t.Error("no status subresource")
			}
			got, has := d.Annotations[approvalAnnotation]
			switch {
			case tc.needsApproval && got != "unapproved, experimental-only":
				t.Errorf("annotation %s = %q, want %q", approvalAnnotation, got, "unapproved, experimental-only")
			case !tc.needsApproval && has:
				t.Errorf("annotation %s set on a non-*.k8s.io group", approvalAnnotation)
			}
			if len(d.Spec.Names.ShortNames) == 0 {
				t.Error("no short names")
			}
			if !slices.Contains(d.Spec.Names.Categories, "netclass") {
				t.Errorf("categories %v lack netclass", d.Spec.Names.Categories)
			}
			var cols []string
			for _, col := range v.AdditionalPrinterColumns {
				cols = append(cols, col.Name)
			}
			for _, want := range tc.columns {
				if !slices.Contains(cols, want) {
					t.Errorf("printer columns %v lack %q", cols, want)
				}
			}
			if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
				t.Fatal("no schema")
			}
			if _, ok := v.Schema.OpenAPIV3Schema.Properties["status"]; !ok {
				t.Error("schema has no status")
			}
			if errs := c.ValidateDefinition(); len(errs) > 0 {
				t.Errorf("the API server would refuse the CRD: %v", errs.ToAggregate())
			}
		})
	}
}

// TestCRDKindsRegistered checks that every CRD's kind (and list kind) is in
// the scheme built from the Go packages, so the YAML and the Go types name
// the same things.
func TestCRDKindsRegistered(t *testing.T) {
	scheme := bothGroups(t)
	for kind, c := range crdschema.LoadRepo(t) {
		gvk := c.GroupVersionKind()
		if !scheme.Recognizes(gvk) {
			t.Errorf("%s: %s not registered in the scheme", kind, gvk)
		}
		list := gvk.GroupVersion().WithKind(c.Definition.Spec.Names.ListKind)
		if !scheme.Recognizes(list) {
			t.Errorf("%s: list kind %s not registered in the scheme", kind, list)
		}
	}
}

// TestApprovalAnnotationRequired shows that the annotation test above is not
// vacuous: the API server's CRD validation refuses a *.k8s.io CRD without it.
func TestApprovalAnnotationRequired(t *testing.T) {
	c := crdschema.LoadRepo(t)["PodNetwork"]
	if c == nil {
		t.Fatal("no PodNetwork CRD")
	}
	stripped, err := c.WithoutAnnotation(approvalAnnotation)
	if err != nil {
		t.Fatal(err)
	}
	if errs := stripped.ValidateDefinition(); len(errs) == 0 {
		t.Fatal("a multinetwork.networking.k8s.io CRD without the approval annotation was accepted")
	}
}

// TestCRDsFitClientSideApply checks that `kubectl apply -f conf/crd/`
// (client-side apply, which keeps the whole object in the
// last-applied-configuration annotation) works: annotations are limited to
// 256 KiB in total.
func TestCRDsFitClientSideApply(t *testing.T) {
	const annotationLimit = 256 * 1024
	for kind, c := range crdschema.LoadRepo(t) {
		data, err := json.Marshal(c.Definition)
		if err != nil {
			t.Fatal(err)
		}
		if len(data) >= annotationLimit {
			t.Errorf("%s: the CRD is %d bytes of JSON, too large for kubectl's last-applied annotation (%d)", kind, len(data), annotationLimit)
		}
	}
}
