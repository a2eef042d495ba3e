// Package crdschema loads the CRD manifests of conf/crd and runs objects
// through the same schema machinery the API server uses for custom resources
// (structural pruning with unknown-field reporting, defaulting, OpenAPI
// validation, list-type invariants and x-kubernetes-validations CEL rules), so
// that schema rules can be tested without a cluster. The API-server tests
// behind the testbed build tag check the same cases against a real server.
package crdschema

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	schemacel "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	structurallisttype "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"
)

// Dir returns the repository's conf/crd directory, located from this
// source file so tests find it from any package directory.
func Dir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("cannot locate the crdschema source file")
	}
	dir := filepath.Join(filepath.Dir(file), "..", "..", "..", "conf", "crd")
	if _, err := os.Stat(dir); err != nil {
		return "", fmt.Errorf("conf/crd: %w", err)
	}
	return filepath.Clean(dir), nil
}

// CRD is one CustomResourceDefinition manifest with the validation machinery
// of its single served version built the way the API server builds it.
type CRD struct {
	// File is the manifest's path.
	File string
	// Definition is the manifest as decoded.
	Definition *apiextensionsv1.CustomResourceDefinition

	internal   *apiextensions.CustomResourceDefinition
	structural *structuralschema.Structural
	validator  apiservervalidation.SchemaValidator
	status     apiservervalidation.SchemaValidator
	cel        *schemacel.Validator
}

// LoadDir loads every *.yaml file directly in dir (not in subdirectories,
// like kubectl apply -f dir) and returns the CRDs by kind.
func LoadDir(dir string) (map[string]*CRD, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	sort.Strings(files)
	out := make(map[string]*CRD, len(files))
	for _, f := range files {
		c, err := Load(f)
		if err != nil {
			return nil, err
		}
		kind := c.Definition.Spec.Names.Kind
		if prev, ok := out[kind]; ok {
			return nil, fmt.Errorf("kind %s defined twice: %s and %s", kind, prev.File, f)
		}
		out[kind] = c
	}
	return out, nil
}

// readV1 reads a file holding one apiextensions.k8s.io/v1 CRD of one version, defaulted.
func readV1(file string) (*apiextensionsv1.CustomResourceDefinition, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read CRD: %w", err)
	}
	var v1 apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(data, &v1); err != nil {
		return nil, fmt.Errorf("decode CRD %s: %w", file, err)
	}
	if v1.Kind != "CustomResourceDefinition" || v1.APIVersion != apiextensionsv1.SchemeGroupVersion.String() {
		return nil, fmt.Errorf("%s: not an %s CustomResourceDefinition (%s %s)", file, apiextensionsv1.SchemeGroupVersion, v1.APIVersion, v1.Kind)
	}
	if len(v1.Spec.Versions) != 1 {
		return nil, fmt.Errorf("%s: expected exactly one version, found %d", file, len(v1.Spec.Versions))
	}
	apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(&v1)
	return &v1, nil
}

// Load reads one CRD manifest and prepares its validators.
func Load(file string) (*CRD, error) {
	v1, err := readV1(file)
	if err != nil {
		return nil, err
	}

	var internal apiextensions.CustomResourceDefinition
	if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(v1, &internal, nil); err != nil {
		return nil, fmt.Errorf("convert CRD %s: %w", file, err)
	}
	// The conversion hoists a schema shared by all versions to spec.validation.
	validation := internal.Spec.Versions[0].Schema
	if validation == nil {
		validation = internal.Spec.Validation
	}
	if validation == nil || validation.OpenAPIV3Schema == nil {
		return nil, fmt.Errorf("%s: version %s has no schema", file, internal.Spec.Versions[0].Name)
	}
	props := validation.OpenAPIV3Schema
	structural, err := structuralschema.NewStructural(props)
	if err != nil {
		return nil, fmt.Errorf("%s: structural schema: %w", file, err)
	}
	validator, _, err := apiservervalidation.NewSchemaValidator(props)
	if err != nil {
		return nil, fmt.Errorf("%s: schema validator: %w", file, err)
	}
	c := &CRD{
		File:       file,
		Definition: v1,
		internal:   &internal,
		structural: structural,
		validator:  validator,
		cel:        schemacel.NewValidator(structural, true, celconfig.PerCallLimit),
	}
	if statusProps, ok := props.Properties["status"]; ok {
		c.status, _, err = apiservervalidation.NewSchemaValidator(&statusProps)
		if err != nil {
			return nil, fmt.Errorf("%s: status schema validator: %w", file, err)
		}
	}
	return c, nil
}

// GroupVersionKind is the GVK the CRD serves.
func (c *CRD) GroupVersionKind() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: c.Definition.Spec.Group, Version: c.Definition.Spec.Versions[0].Name, Kind: c.Definition.Spec.Names.Kind}
}

// ValidateDefinition runs the API server's validation of the CRD itself:
// structural schema, defaults, list types, CEL compilation and cost limits,
// the API-approval annotation of *.k8s.io groups.
func (c *CRD) ValidateDefinition() field.ErrorList {
	return apiextensionsvalidation.ValidateCustomResourceDefinition(context.Background(), c.internal)
}

func (c *CRD) statusEnabled() bool {
	s := c.Definition.Spec.Versions[0].Subresources
	return s != nil && s.Status != nil
}

// decode copies obj and coerces it the way the API server's decoder does:
// prune unknown fields (returned, as strict field validation reports them),
// drop non-nullable nulls, apply defaults.
func (c *CRD) decode(obj map[string]any) (map[string]any, []string) {
	u := k8sruntime.DeepCopyJSON(obj)
	unknown := structuralpruning.PruneWithOptions(u, c.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
	structuraldefaulting.PruneNonNullableNullsWithoutDefaults(u, c.structural)
	structuraldefaulting.Default(u, c.structural)
	return u, unknown
}

// Result is the outcome of a simulated request.
type Result struct {
	// Object is the object as the API server would store it.
	Object map[string]any
	// Unknown lists the fields strict field validation refuses (pruned).
	Unknown []string
	// Errs are the validation errors; the request is refused when non-empty.
	Errs field.ErrorList
}

// Refused reports whether a strict request would be refused.
func (r Result) Refused() bool { return len(r.Errs) > 0 || len(r.Unknown) > 0 }

// Error joins the unknown fields and validation errors, or returns "" when
// the request would succeed.
func (r Result) Error() string {
	var parts []string
	for _, u := range r.Unknown {
		parts = append(parts, fmt.Sprintf("unknown field %q", u))
	}
	for _, e := range r.Errs {
		parts = append(parts, e.Error())
	}
	return strings.Join(parts, "; ")
}

// Create simulates a create request with strict field validation.
func (c *CRD) Create(obj map[string]any) Result {
	u, unknown := c.decode(obj)
	if c.statusEnabled() {
		delete(u, "status") // create cannot set status
	}
	errs := c.validateTypeMeta(u)
	if len(errs) == 0 {
		errs = append(errs, apiservervalidation.ValidateCustomResource(nil, u, c.validator)...)
		errs = append(errs, structurallisttype.ValidateListSetsAndMaps(nil, c.structural, u)...)
		errs = append(errs, c.celValidate(u, nil, errs)...)
	}
	return Result{Object: u, Unknown: unknown, Errs: errs}
}

// Update simulates an update of the main resource from old (as stored) to
// obj, with strict field validation. With the status subresource, status
// changes are ignored.
func (c *CRD) Update(old, obj map[string]any) Result {
	u, unknown := c.decode(obj)
	if c.statusEnabled() {
		if s, ok := old["status"]; ok {
			u["status"] = k8sruntime.DeepCopyJSONValue(s)
		} else {
			delete(u, "status")
		}
	}
	errs := c.validateTypeMeta(u)
	if len(errs) == 0 {
		errs = append(errs, apiservervalidation.ValidateCustomResourceUpdate(nil, u, old, c.validator)...)
		errs = append(errs, structurallisttype.ValidateListSetsAndMaps(nil, c.structural, u)...)
		errs = append(errs, c.celValidate(u, old, errs)...)
	}
	return Result{Object: u, Unknown: unknown, Errs: errs}
}

// UpdateStatus simulates a write to the status subresource: only obj's
// status is taken, everything else stays as in old.
func (c *CRD) UpdateStatus(old, obj map[string]any) Result {
	if !c.statusEnabled() || c.status == nil {
		return Result{Errs: field.ErrorList{field.NotFound(field.NewPath("status"), "status subresource")}}
	}
	decoded, unknown := c.decode(obj)
	u := k8sruntime.DeepCopyJSON(old)
	if s, ok := decoded["status"]; ok {
		u["status"] = s
	} else {
		delete(u, "status")
	}
	errs := c.validateTypeMeta(u)
	if len(errs) == 0 {
		if s, ok := u["status"]; ok {
			errs = append(errs, apiservervalidation.ValidateCustomResourceUpdate(field.NewPath("status"), s, old["status"], c.status)...)
		}
		errs = append(errs, structurallisttype.ValidateListSetsAndMaps(nil, c.structural, u)...)
		errs = append(errs, c.celValidate(u, old, errs)...)
	}
	return Result{Object: u, Unknown: unknown, Errs: errs}
}

func (c *CRD) validateTypeMeta(u map[string]any) field.ErrorList {
	gvk := c.GroupVersionKind()
	var errs field.ErrorList
	if kind, _ := u["kind"].(string); kind != gvk.Kind {
		errs = append(errs, field.Invalid(field.NewPath("kind"), u["kind"], "must be "+gvk.Kind))
	}
	if av, _ := u["apiVersion"].(string); av != gvk.GroupVersion().String() {
		errs = append(errs, field.Invalid(field.NewPath("apiVersion"), u["apiVersion"], "must be "+gvk.GroupVersion().String()))
	}
	return errs
}

// celValidate runs the CEL rules unless earlier errors would make the API
// server skip them (it then reports that instead).
func (c *CRD) celValidate(u, old map[string]any, prior field.ErrorList) field.ErrorList {
	for _, e := range prior {
		switch e.Type {
		case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong, field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
			return field.ErrorList{field.Invalid(nil, nil, "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation")}
		}
	}
	var oldObj any
	if old != nil {
		oldObj = old
	}
	errs, _ := c.cel.Validate(context.Background(), nil, c.structural, u, oldObj, celconfig.RuntimeCELCostBudget)
	return errs
}

// Doc is one YAML document of a manifest file.
type Doc struct {
	// Raw is the document's text as written.
	Raw []byte
	// Object is the document decoded into JSON values.
	Object map[string]any
}

// ReadDocs splits a (multi-document) YAML file into its non-empty documents.
func ReadDocs(file string) ([]Doc, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("open manifest: %w", err)
	}
	defer f.Close()
	r := utilyaml.NewYAMLReader(bufio.NewReader(f))
	var docs []Doc
	for {
		raw, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", file, err)
		}
		obj, err := decodeYAML(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if len(obj) == 0 {
			continue // only comments
		}
		docs = append(docs, Doc{Raw: raw, Object: obj})
	}
}

// WithoutAnnotation returns a copy of the CRD without the given annotation.
func (c *CRD) WithoutAnnotation(key string) (*CRD, error) {
	v1 := c.Definition.DeepCopy()
	delete(v1.Annotations, key)
	var internal apiextensions.CustomResourceDefinition
	if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(v1, &internal, nil); err != nil {
		return nil, fmt.Errorf("convert CRD: %w", err)
	}
	cp := *c
	cp.Definition, cp.internal = v1, &internal
	return &cp, nil
}

// LoadRepo loads the CRDs of the repository's conf/crd, failing the test on error.
func LoadRepo(t testing.TB) map[string]*CRD {
	t.Helper()
	dir, err := Dir()
	if err != nil {
		t.Fatal(err)
	}
	crds, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return crds
}
