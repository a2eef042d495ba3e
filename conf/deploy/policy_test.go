package deploy_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"
)

// policy is a ValidatingAdmissionPolicy of conf/deploy compiled the way the
// API server compiles it (k8s.io/apiserver's validating admission policy
// plugin, the same CEL environment and libraries), with the expressions held
// to the rules the API server applies to a policy being created.
type policy struct {
	spec      *admissionregistrationv1.ValidatingAdmissionPolicy
	validator validating.Validator
}

func loadPolicy(t testing.TB, name string) *policy {
	t.Helper()
	for _, o := range decodeAll(t, "*.yaml") {
		if p, ok := o.(*admissionregistrationv1.ValidatingAdmissionPolicy); ok && p.Name == name {
			return &policy{spec: p, validator: compilePolicy(p)}
		}
	}
	t.Fatalf("no ValidatingAdmissionPolicy %s in conf/deploy", name)
	return nil
}

// compilePolicy is k8s.io/apiserver's compilePolicy (unexported there), in
// the mode of a newly written policy.
func compilePolicy(p *admissionregistrationv1.ValidatingAdmissionPolicy) validating.Validator {
	mode := environment.NewExpressions
	compiler, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	if err != nil {
		return validating.NewValidator(nil, nil, nil, nil, p.Spec.FailurePolicy, err)
	}
	vars := plugincel.OptionalVariableDeclarations{HasAuthorizer: true}
	named := make([]plugincel.NamedExpressionAccessor, len(p.Spec.Variables))
	for i, v := range p.Spec.Variables {
		named[i] = &validating.Variable{Name: v.Name, Expression: v.Expression}
	}
	compiler.CompileAndStoreVariables(named, vars, mode)
	match := make([]plugincel.ExpressionAccessor, len(p.Spec.MatchConditions))
	for i := range p.Spec.MatchConditions {
		match[i] = (*matchconditions.MatchCondition)(&p.Spec.MatchConditions[i])
	}
	validations := make([]plugincel.ExpressionAccessor, len(p.Spec.Validations))
	messages := make([]plugincel.ExpressionAccessor, len(p.Spec.Validations))
	for i, v := range p.Spec.Validations {
		validations[i] = &validating.ValidationCondition{Expression: v.Expression, Message: v.Message, Reason: v.Reason}
		if v.MessageExpression != "" {
			messages[i] = &validating.MessageExpressionCondition{MessageExpression: v.MessageExpression}
		}
	}
	return validating.NewValidator(
		compiler.CompileCondition(validations, vars, mode),
		matchconditions.NewMatcher(compiler.CompileCondition(match, vars, mode), p.Spec.FailurePolicy, "policy", "validate", p.Name),
		compiler.CompileCondition(nil, vars, mode),
		compiler.CompileCondition(messages, plugincel.OptionalVariableDeclarations{}, mode),
		p.Spec.FailurePolicy, nil)
}

// matches reports whether the policy's match constraints select the request.
func (p *policy) matches(gvr schema.GroupVersionResource, op admission.Operation) bool {
	for _, r := range p.spec.Spec.MatchConstraints.ResourceRules {
		if contains(r.APIGroups, gvr.Group) && contains(r.Resources, gvr.Resource) && contains(r.APIVersions, gvr.Version) &&
			containsOp(r.Operations, op) {
			return true
		}
	}
	return false
}

func contains(list []string, v string) bool {
	for _, s := range list {
		if s == v || s == "*" {
			return true
		}
	}
	return false
}

func containsOp(ops []admissionregistrationv1.OperationType, op admission.Operation) bool {
	for _, o := range ops {
		if string(o) == string(op) || o == admissionregistrationv1.OperationAll {
			return true
		}
	}
	return false
}

// review is the policy's verdict on a request: refused, and the message;
// an expression that fails to compile or evaluate fails the test.
func (p *policy) review(t testing.TB, op admission.Operation, gvr schema.GroupVersionResource, gvk schema.GroupVersionKind, obj, old runtime.Object) (bool, string) {
	t.Helper()
	return p.reviewAs(t, &user.DefaultInfo{Name: "alice"}, "", op, gvr, gvk, obj, old)
}

// reviewAs is review of a request by who, on a subresource ("": none).
func (p *policy) reviewAs(t testing.TB, who user.Info, sub string, op admission.Operation, gvr schema.GroupVersionResource, gvk schema.GroupVersionKind, obj, old runtime.Object) (bool, string) {
	t.Helper()
	match := gvr
	if sub != "" {
		match.Resource += "/" + sub
	}
	if !p.matches(match, op) {
		return false, ""
	}
	acc, err := meta(obj)
	if err != nil {
		t.Fatal(err)
	}
	attrs := admission.NewAttributesRecord(obj, old, gvk, acc.GetNamespace(), acc.GetName(), gvr, sub, op, nil, false, who)
	va := &admission.VersionedAttributes{Attributes: attrs, VersionedKind: gvk, VersionedObject: admission.NewLazyObject(obj)}
	if old != nil {
		va.VersionedOldObject = admission.NewLazyObject(old)
	}
	res := p.validator.Validate(context.Background(), gvr, va, nil, nil, celconfig.RuntimeCELCostBudget, nil)
	for _, d := range res.Decisions {
		switch d.Evaluation {
		case validating.EvalError:
			t.Fatalf("policy %s on %s: evaluation error: %s", p.spec.Name, gvr.Resource, d.Message)
		case validating.EvalDeny:
			return true, d.Message
		}
	}
	return false, ""
}

func meta(obj runtime.Object) (metav1.Object, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u, nil
	}
	return obj.(metav1.Object), nil
}

var (
	claimsGVR    = schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1", Resource: "resourceclaims"}
	templatesGVR = schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1", Resource: "resourceclaimtemplates"}
	classesGVR   = schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1", Resource: "deviceclasses"}
	podNetsGVR   = schema.GroupVersionResource{Group: "multinetwork.networking.k8s.io", Version: "v1", Resource: "podnetworks"}
	netsGVR      = schema.GroupVersionResource{Group: "netclass.dev", Version: "v1alpha1", Resource: "networks"}
)

// opaque is a driver's opaque configuration for every request.
func opaque(driver, params string) resourceapi.DeviceClaimConfiguration {
	return resourceapi.DeviceClaimConfiguration{DeviceConfiguration: resourceapi.DeviceConfiguration{
		Opaque: &resourceapi.OpaqueDeviceConfiguration{Driver: driver, Parameters: runtime.RawExtension{Raw: []byte(params)}},
	}}
}

func claimWith(configs ...resourceapi.DeviceClaimConfiguration) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "c"},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "blue", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "netclass"}}},
			Config:   configs,
		}},
	}
}

// reviewParams is the verdict on an AttachmentConfig written in a
// ResourceClaim, a ResourceClaimTemplate and a DeviceClass: the three must agree.
func reviewParams(t testing.TB, p *policy, params string) (bool, string) {
	t.Helper()
	claim := claimWith(opaque("other.example.com", `{"any":"thing"}`), opaque("netclass.dev", params))
	refused, msg := p.review(t, admission.Create, claimsGVR, claimsGVR.GroupVersion().WithKind("ResourceClaim"), claim, nil)
	tmpl := &resourceapi.ResourceClaimTemplate{ObjectMeta: claim.ObjectMeta, Spec: resourceapi.ResourceClaimTemplateSpec{Spec: claim.Spec}}
	tRefused, tMsg := p.review(t, admission.Create, templatesGVR, templatesGVR.GroupVersion().WithKind("ResourceClaimTemplate"), tmpl, nil)
	class := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "netclass-x"}, Spec: resourceapi.DeviceClassSpec{
		Config: []resourceapi.DeviceClassConfiguration{{DeviceConfiguration: opaque("netclass.dev", params).DeviceConfiguration}}}}
	cRefused, _ := p.review(t, admission.Create, classesGVR, classesGVR.GroupVersion().WithKind("DeviceClass"), class, nil)
	if tRefused != refused || cRefused != refused {
		t.Errorf("%s: claim refused=%v, template %v, DeviceClass %v", params, refused, tRefused, cRefused)
	}
	if refused && !strings.Contains(tMsg, "spec.spec.devices.config[1].opaque.parameters") {
		t.Errorf("%s: the template's message does not name its field: %s", params, tMsg)
	}
	return refused, msg
}

func toUnstructured(t testing.TB, obj map[string]any) *unstructured.Unstructured {
	t.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(raw); err != nil {
		t.Fatal(err)
	}
	return u
}
