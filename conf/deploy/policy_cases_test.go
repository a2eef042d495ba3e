package deploy_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"

	mnv1 "github.com/netclass-dev/netclass/api/multinetwork/v1"
	"github.com/netclass-dev/netclass/controller/podnetwork"
	"github.com/netclass-dev/netclass/shim/attachment"
)

const head = `"apiVersion":"netclass.dev/v1alpha1","kind":"AttachmentConfig"`

// attachmentCases are AttachmentConfigs, and the field a refusal must name
// ("" when netclass-dra accepts the config).
var attachmentCases = []struct{ params, field string }{
	{`{` + head + `}`, ""},
	{`{` + head + `,"interfaceName":"data0","mac":"02:00:00:00:10:01","ips":["10.10.1.50/24","fd00::5/64"],"qos":{"dscp":46,"egressRate":10000000,"egressBurst":200000}}`, ""},
	{`{` + head + `,"interfaceName":null,"mac":null,"ips":null,"qos":null}`, ""},
	{`{` + head + `,"interfaceName":"","mac":""}`, ""},
	{`{` + head + `,"interfaceName":"eth0"}`, "interfaceName"},
	{`{` + head + `,"interfaceName":"lo"}`, "interfaceName"},
	{`{` + head + `,"interfaceName":"a-very-long-name"}`, "interfaceName"},
	{`{` + head + `,"interfaceName":"abcdefghijklmno"}`, ""},
	{`{` + head + `,"interfaceName":"net 1"}`, "interfaceName"},
	{`{` + head + `,"interfaceName":"net/1"}`, "interfaceName"},
	{`{` + head + `,"interfaceName":"net:1"}`, "interfaceName"},
	{`{` + head + `,"interfaceName":"net%d"}`, "interfaceName"},
	{`{` + head + `,"interfaceName":"nét1"}`, "interfaceName"},
	{`{` + head + `,"interfaceName":".."}`, "interfaceName"},
	{`{` + head + `,"interfaceName":"..."}`, ""},
	{`{` + head + `,"interfaceName":"a~!#&*+.[]^_{}|"}`, ""},
	{`{` + head + `,"interfaceName":"net\t1"}`, "interfaceName"},
	{`{` + head + `,"interfaceName":7}`, "interfaceName"},
	{`{` + head + `,"InterfaceName":"net1"}`, "InterfaceName"},
	{`{` + head + `,"vlan":5}`, "vlan"},
	{`{"apiVersion":"netclass.dev/v1","kind":"AttachmentConfig"}`, "apiVersion"},
	{`{"apiVersion":"netclass.dev/v1alpha1","kind":"Attachment"}`, "kind"},
	{`{"kind":"AttachmentConfig"}`, "apiVersion"},
	{`{"apiVersion":null,"kind":"AttachmentConfig"}`, "apiVersion"},
	{`{}`, "apiVersion"},
	{`[]`, "parameters"},
	{`"x"`, "parameters"},
	{`{` + head + `,"mac":"02:00:00:00:00:01"}`, ""},
	{`{` + head + `,"mac":"02-00-00-00-00-0A"}`, ""},
	{`{` + head + `,"mac":"0200.0000.00ff"}`, ""},
	{`{` + head + `,"mac":"02:00-00:00:00:01"}`, "mac"},
	{`{` + head + `,"mac":"01:00:5e:00:00:01"}`, "mac"},
	{`{` + head + `,"mac":"00:00:00:00:00:00"}`, "mac"},
	{`{` + head + `,"mac":"0000.0000.0000"}`, "mac"},
	{`{` + head + `,"mac":"02:00:00:00:00:00:00:01"}`, "mac"},
	{`{` + head + `,"mac":"2:0:0:0:0:1"}`, "mac"},
	{`{` + head + `,"mac":"zz:00:00:00:00:01"}`, "mac"},
	{`{` + head + `,"mac":"0a:00:00:00:00:01"}`, ""},
	{`{` + head + `,"mac":"0B:00:00:00:00:01"}`, "mac"},
	{`{` + head + `,"ips":["10.1.1.5"]}`, "ips[0]"},
	{`{` + head + `,"ips":["10.1.1.0/24"]}`, "ips[0]"},
	{`{` + head + `,"ips":["10.1.1.0/31"]}`, ""},
	{`{` + head + `,"ips":["10.1.1.1/32"]}`, ""},
	{`{` + head + `,"ips":["fd00::/64"]}`, "ips[0]"},
	{`{` + head + `,"ips":["fd00::/127"]}`, ""},
	{`{` + head + `,"ips":["127.0.0.1/8"]}`, "ips[0]"},
	{`{` + head + `,"ips":["224.0.0.5/24"]}`, "ips[0]"},
	{`{` + head + `,"ips":["fe80::1/64"]}`, "ips[0]"},
	{`{` + head + `,"ips":["255.255.255.255/32"]}`, "ips[0]"},
	{`{` + head + `,"ips":["::ffff:10.1.1.5/120"]}`, "ips[0]"},
	{`{` + head + `,"ips":["010.1.1.5/24"]}`, "ips[0]"},
	{`{` + head + `,"ips":["10.1.1.5/24","10.1.1.5/16"]}`, "ips[1]"},
	{`{` + head + `,"ips":["fd00::5/64","fd00:0::5/64"]}`, "ips[1]"},
	{`{` + head + `,"ips":["10.1.1.5/24",null]}`, "ips[1]"},
	{`{` + head + `,"ips":"10.1.1.5/24"}`, "ips"},
	{`{` + head + `,"qos":{"dscp":64}}`, "qos.dscp"},
	{`{` + head + `,"qos":{"dscp":-1}}`, "qos.dscp"},
	{`{` + head + `,"qos":{"dscp":63}}`, ""},
	{`{` + head + `,"qos":{"dscp":1.5}}`, "qos.dscp"},
	{`{` + head + `,"qos":{"dscp":"46"}}`, "qos.dscp"},
	{`{` + head + `,"qos":{"queue":"fq_codel","egressRate":8000,"egressBurst":800}}`, ""},
	{`{` + head + `,"qos":{"queue":"cake"}}`, ""},
	{`{` + head + `,"qos":{"queue":"tbf"}}`, ""},
	{`{` + head + `,"qos":{"queue":null}}`, ""},
	{`{` + head + `,"qos":{"queue":"pfifo"}}`, "qos.queue"},
	{`{` + head + `,"qos":{"queue":"CAKE"}}`, "qos.queue"},
	{`{` + head + `,"qos":{"queue":5}}`, "qos.queue"},
	{`{` + head + `,"qos":{"Queue":"cake"}}`, "Queue"},
	{`{` + head + `,"qos":{"DSCP":46}}`, "DSCP"},
	{`{` + head + `,"qos":{"dſcp":46}}`, "dſcp"},
	{`{` + head + `,"qos":{"egressRate":1000}}`, "qos.egressBurst"},
	{`{` + head + `,"qos":{"egressBurst":1000}}`, "qos.egressRate"},
	{`{` + head + `,"qos":{"ingressRate":-8,"ingressBurst":8}}`, "qos.ingressRate"},
	{`{` + head + `,"qos":{"ingressRate":7,"ingressBurst":8000}}`, "qos.ingressRate"},
	{`{` + head + `,"qos":{"ingressRate":8000,"ingressBurst":7}}`, "qos.ingressBurst"},
	{`{` + head + `,"qos":{"ingressRate":80000000000,"ingressBurst":8}}`, "qos.ingressBurst"},
	{`{` + head + `,"qos":{"ingressRate":8,"ingressBurst":34359738360}}`, "qos.ingressBurst"},
	{`{` + head + `,"qos":{"ingressRate":8,"ingressBurst":34359738368}}`, "qos.ingressBurst"},
	{`{` + head + `,"qos":{"ingressRate":1000000000000,"ingressBurst":34359738360}}`, "qos.ingressRate"},
	{`{` + head + `,"qos":{"ingressRate":125000000000,"ingressBurst":8}}`, "qos.ingressBurst"},
	{`{` + head + `,"qos":{"ingressRate":125000000000,"ingressBurst":80000}}`, ""},
	{`{` + head + `,"qos":{"egressRate":8,"egressBurst":8000}}`, "qos.egressBurst"},
	{`{` + head + `,"qos":{"egressRate":8,"egressBurst":2000}}`, ""},
	{`{` + head + `,"qos":{"egressRate":8,"egressBurst":2200}}`, "qos.egressBurst"},
	{`{` + head + `,"qos":{"egressRate":1e3,"egressBurst":8000}}`, "qos.egressRate"},
	{`{` + head + `,"qos":{"egressRate":null,"egressBurst":null,"dscp":null,"egress":null}}`, ""},
	{`{` + head + `,"qos":[]}`, "qos"},
	{`{` + head + `,"qos":{"egress":[{"priority":10,"dscp":20,"classifier":{"to":[{"ipBlock":{"cidr":"0.0.0.0/0","except":["10.0.0.0/8"]}}],"ports":[{"protocol":"TCP","port":80}]},"bandwidth":{"rate":1000,"burst":1000}}]}}`, ""},
	{`{` + head + `,"qos":{"egress":[{"priority":1}]}}`, "qos.egress[0]"},
	{`{` + head + `,"qos":{"egress":[null]}}`, "qos.egress[0]"},
	{`{` + head + `,"qos":{"egress":[{"dscp":1,"priority":65536}]}}`, "qos.egress[0].priority"},
	{`{` + head + `,"qos":{"egress":[{"dscp":1,"priority":null,"classifier":null,"bandwidth":null}]}}`, ""},
	{`{` + head + `,"qos":{"egress":[{"bandwidth":{"rate":0}}]}}`, "qos.egress[0].bandwidth.rate"},
	{`{` + head + `,"qos":{"egress":[{"bandwidth":{"rate":1,"burst":-1}}]}}`, "qos.egress[0].bandwidth.burst"},
	{`{` + head + `,"qos":{"egress":[{"bandwidth":{"rate":4294967296}}]}}`, "qos.egress[0].bandwidth.rate"},
	{`{` + head + `,"qos":{"egress":[{"bandwidth":{"rate":1,"burst":34359739}}]}}`, "qos.egress[0].bandwidth.burst"},
	{`{` + head + `,"qos":{"egress":[{"bandwidth":{"rate":4294967295,"burst":34359738}}]}}`, ""},
	{`{` + head + `,"qos":{"egress":[{"bandwidth":{"Rate":5}}]}}`, "Rate"},
	{`{` + head + `,"qos":{"egress":[{"dscp":1,"classifier":{"to":[{"podSelector":{}}]}}]}}`, "podSelector"},
	{`{` + head + `,"qos":{"egress":[{"dscp":1,"classifier":{"to":[{}]}}]}}`, "qos.egress[0].classifier.to[0].ipBlock"},
	{`{` + head + `,"qos":{"egress":[{"dscp":1,"classifier":{"to":[{"ipBlock":{"cidr":"10.0.0.0/33"}}]}}]}}`, "ipBlock.cidr"},
	{`{` + head + `,"qos":{"egress":[{"dscp":1,"classifier":{"to":[{"ipBlock":{"cidr":"::ffff:10.0.0.0/104"}}]}}]}}`, "ipBlock.cidr"},
	{`{` + head + `,"qos":{"egress":[{"dscp":1,"classifier":{"to":[{"ipBlock":{"cidr":"10.0.0.0/8","except":["11.0.0.0/16"]}}]}}]}}`, "except[0]"},
	{`{` + head + `,"qos":{"egress":[{"dscp":1,"classifier":{"to":[{"ipBlock":{"cidr":"10.0.0.0/16","except":["10.0.0.0/8"]}}]}}]}}`, "except[0]"},
	{`{` + head + `,"qos":{"egress":[{"dscp":1,"classifier":{"to":[{"ipBlock":{"cidr":"10.0.0.0/8","except":["fd00::/8"]}}]}}]}}`, "except[0]"},
	{`{` + head + `,"qos":{"egress":[{"dscp":1,"classifier":{"to":[{"ipBlock":{"cidr":"10.1.2.3/8","except":["10.200.0.0/16","10.1.2.3/32"]}}]}}]}}`, ""},
	{`{` + head + `,"qos":{"egress":[{"dscp":1,"classifier":{"ports":[{"protocol":"ICMP"}]}}]}}`, "ports[0].protocol"},
	{`{` + head + `,"qos":{"egress":[{"dscp":1,"classifier":{"ports":[{"protocol":"sctp","port":65535},{"protocol":"ſctp"},{"protocol":"uDp","port":null}]}}]}}`, ""},
	{`{` + head + `,"qos":{"egress":[{"dscp":1,"classifier":{"ports":[{"protocol":"TCP","port":0}]}}]}}`, "ports[0].port"},
	{`{` + head + `,"qos":{"egress":[{"dscp":1,"classifier":{"ports":[null]}}]}}`, "ports[0].protocol"},
	{`{` + head + `,"qos":{"egress":[{"dscp":1,"classifier":{"ports":{}}}]}}`, "classifier.ports"},
	{`{` + head + `,"qos":{"egress":[{"dscp":1,"classifier":{"Ports":[]}}]}}`, "Ports"},
}

// The policy refuses exactly the AttachmentConfigs netclass-dra's parser
// refuses, naming the field, in claims, templates and DeviceClasses alike.
func TestPolicyAgreesWithAttachmentParser(t *testing.T) {
	p := loadPolicy(t, "netclass-parameters")
	for _, c := range attachmentCases {
		_, perr := attachment.ParseConfig([]byte(c.params))
		refused, msg := reviewParams(t, p, c.params)
		if (perr != nil) != (c.field != "") {
			t.Errorf("%s: parser error %v, but the case expects field %q", c.params, perr, c.field)
		}
		if refused != (perr != nil) {
			t.Errorf("%s: policy refused=%v (%s), parser error %v", c.params, refused, msg, perr)
			continue
		}
		if refused && !strings.Contains(msg, "spec.devices.config[1].opaque.parameters") || !strings.Contains(msg, c.field) {
			t.Errorf("%s: the message does not name %s: %s", c.params, c.field, msg)
		}
	}
}

// Another driver's configuration is not netclass's business, whatever it holds.
func TestPolicyIgnoresOtherDrivers(t *testing.T) {
	p := loadPolicy(t, "netclass-parameters")
	claim := claimWith(opaque("other.example.com", `{"interfaceName":"eth0"}`))
	if refused, msg := p.review(t, admission.Create, claimsGVR, claimsGVR.GroupVersion().WithKind("ResourceClaim"), claim, nil); refused {
		t.Errorf("another driver's config refused: %s", msg)
	}
	if refused, msg := p.review(t, admission.Create, claimsGVR, claimsGVR.GroupVersion().WithKind("ResourceClaim"), claimWith(), nil); refused {
		t.Errorf("a claim without config refused: %s", msg)
	}
}

// noDuplicateKeys reports whether a JSON document has no object with a key
// twice (CEL sees decoded objects, where the last of two keys won).
func noDuplicateKeys(raw []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(raw))
	var walk func() bool
	walk = func() bool {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				k, err := dec.Token()
				if err != nil || seen[k.(string)] {
					return false
				}
				seen[k.(string)] = true
				if !walk() {
					return false
				}
			}
			_, err := dec.Token()
			return err == nil
		case json.Delim('['):
			for dec.More() {
				if !walk() {
					return false
				}
			}
			_, err := dec.Token()
			return err == nil
		}
		return true
	}
	if !walk() {
		return false
	}
	_, err := dec.Token()
	return errors.Is(err, io.EOF)
}

func FuzzPolicyAgreesWithAttachmentParser(f *testing.F) {
	for _, c := range attachmentCases {
		f.Add(c.params)
	}
	p := loadPolicy(f, "netclass-parameters")
	f.Fuzz(func(t *testing.T, params string) {
		if !json.Valid([]byte(params)) || !noDuplicateKeys([]byte(params)) {
			return // the API server holds valid JSON; CEL cannot see duplicate keys
		}
		_, perr := attachment.ParseConfig([]byte(params))
		refused, msg := reviewParams(t, p, params)
		if refused != (perr != nil) {
			t.Fatalf("%s: policy refused=%v (%s), parser error %v", params, refused, msg, perr)
		}
	})
}

// podNetworkCases: PodNetwork parameters, and the field a refusal names
// ("" when the policy admits them; the controller may still find them invalid).
var podNetworkCases = []struct {
	provider, params, field string
}{
	{"netclass.dev", `{"type":"netclass-bridge","bridge":"blue0","ipam":{"type":"host-local","ranges":[[{"subnet":"10.10.1.0/24"}]]}}`, ""},
	{"netclass.dev", `{"type":"netclass-vxlan","vni":7,"qos":{"dscp":46,"egressRate":1000000,"egressBurst":100000}}`, ""},
	{"netclass.dev", `{"type":"bridge"}`, "spec.parameters.type"},
	{"netclass.dev", `{"type":"netclass-qos"}`, "spec.parameters.type"},
	{"netclass.dev", `{"bridge":"blue0"}`, "spec.parameters.type"},
	{"netclass.dev", `{"type":7}`, "spec.parameters.type"},
	{"netclass.dev", `null`, "spec.parameters"},
	{"netclass.dev", `{"type":"netclass-bridge","qos":{"dscp":99}}`, "spec.parameters.qos.dscp"},
	{"netclass.dev", `{"type":"netclass-bridge","qos":{"egressRate":1000}}`, "spec.parameters.qos.egressBurst"},
	{"netclass.dev", `{"type":"netclass-bridge","qos":{"egress":[{"priority":3}]}}`, "spec.parameters.qos.egress[0]"},
	// Keys the plugins read case-insensitively: left to the controller.
	{"netclass.dev", `{"type":"netclass-bridge","qos":{"dscp":99,"DSCP":1}}`, ""},
	{"netclass.dev", `{"type":"netclass-bridge","qos":{"dscp":99},"QoS":{"dscp":1}}`, ""},
	{"netclass.dev", `{"type":"netclass-bridge","qos":{"egress":[{"dscp":1,"classifier":{"to":[{"ipBlock":{"cidr":"::ffff:10.0.0.0/104"}}]}}]}}`, ""},
	{"other.example.com", `{"type":"anything","qos":{"dscp":99}}`, ""},
}

// The policy refuses a PodNetwork only when netclass's controller would
// find its parameters invalid too (it checks no more than CEL can be sure of).
func TestPolicyOnPodNetworks(t *testing.T) {
	p := loadPolicy(t, "netclass-parameters")
	for _, c := range podNetworkCases {
		refused, msg := reviewPodNetwork(t, p, c.provider, c.params)
		if refused != (c.field != "") || !strings.Contains(msg, c.field) {
			t.Errorf("%s %s: refused=%v %q, want the field %q", c.provider, c.params, refused, msg, c.field)
		}
		if err := controllerValidates(c.params); refused && c.provider == "netclass.dev" && err == nil {
			t.Errorf("%s: the policy refuses what the controller accepts", c.params)
		}
	}
}

func reviewPodNetwork(t testing.TB, p *policy, provider, params string) (bool, string) {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(params), &v); err != nil {
		t.Fatal(err)
	}
	spec := map[string]any{"enabled": true, "provider": provider}
	if v != nil {
		spec["parameters"] = v
	}
	pn := toUnstructured(t, map[string]any{
		"apiVersion": "multinetwork.networking.k8s.io/v1", "kind": "PodNetwork",
		"metadata": map[string]any{"name": "blue"}, "spec": spec,
	})
	return p.review(t, admission.Create, podNetsGVR, pn.GroupVersionKind(), pn, nil)
}

// controllerValidates is netclass-controller's judgement of PodNetwork parameters.
func controllerValidates(params string) error {
	pn := &mnv1.PodNetwork{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Spec: mnv1.PodNetworkSpec{Parameters: runtime.RawExtension{Raw: []byte(params)}}}
	return podnetwork.ValidateParameters(pn)
}

func FuzzPodNetworkPolicyRefusesOnlyInvalid(f *testing.F) {
	for _, c := range podNetworkCases {
		f.Add(c.params)
	}
	p := loadPolicy(f, "netclass-parameters")
	f.Fuzz(func(t *testing.T, params string) {
		if !json.Valid([]byte(params)) || !noDuplicateKeys([]byte(params)) {
			return
		}
		refused, msg := reviewPodNetwork(t, p, "netclass.dev", params)
		if err := controllerValidates(params); refused && err == nil {
			t.Fatalf("%s: refused (%s) although the controller accepts it", params, msg)
		}
	})
}

// A spec that does not change (a finalizer, a label) is never judged, so
// objects created before the policy keep working; a changed one is.
func TestPolicyOnUpdates(t *testing.T) {
	p := loadPolicy(t, "netclass-parameters")
	bad := `{"type":"netclass-bridge","qos":{"dscp":99}}`
	var v any
	_ = json.Unmarshal([]byte(bad), &v)
	pn := func(finalizers ...string) map[string]any {
		return map[string]any{"apiVersion": "multinetwork.networking.k8s.io/v1", "kind": "PodNetwork",
			"metadata": map[string]any{"name": "blue", "finalizers": finalizers},
			"spec":     map[string]any{"enabled": true, "provider": "netclass.dev", "parameters": v}}
	}
	old, updated := toUnstructured(t, pn("netclass.dev/in-use")), toUnstructured(t, pn())
	if refused, msg := p.review(t, admission.Update, podNetsGVR, old.GroupVersionKind(), updated, old); refused {
		t.Errorf("removing a finalizer from an invalid PodNetwork refused: %s", msg)
	}
	changed := toUnstructured(t, pn())
	_ = unstructured.SetNestedField(changed.Object, false, "spec", "enabled")
	if refused, _ := p.review(t, admission.Update, podNetsGVR, old.GroupVersionKind(), changed, old); !refused {
		t.Error("a spec change of an invalid PodNetwork admitted")
	}
}

func TestPolicyOnNetworks(t *testing.T) {
	p := loadPolicy(t, "netclass-parameters")
	for _, c := range []struct {
		ipam  any
		field string
	}{
		{nil, ""},
		{map[string]any{"type": "host-local", "ranges": []any{}}, ""},
		{map[string]any{"ranges": []any{}}, ""},
		{"host-local", "spec.ipam"},
		{map[string]any{"type": 5}, "spec.ipam.type"},
	} {
		spec := map[string]any{"clusterNetworkName": "red"}
		if c.ipam != nil {
			spec["ipam"] = c.ipam
		}
		n := toUnstructured(t, map[string]any{"apiVersion": "netclass.dev/v1alpha1", "kind": "Network",
			"metadata": map[string]any{"namespace": "tenant", "name": "red"}, "spec": spec})
		refused, msg := p.review(t, admission.Create, netsGVR, n.GroupVersionKind(), n, nil)
		if refused != (c.field != "") || !strings.Contains(msg, c.field) {
			t.Errorf("ipam %v: refused=%v %q, want the field %q", c.ipam, refused, msg, c.field)
		}
	}
}

// Claims are updated by Kubernetes itself (finalizers, annotations): an
// update that leaves the spec alone is never judged, even for a claim the
// policy would refuse now, and the spec comparison of typed objects works.
func TestPolicyOnClaimUpdates(t *testing.T) {
	p := loadPolicy(t, "netclass-parameters")
	old := claimWith(opaque("netclass.dev", `{`+head+`,"interfaceName":"eth0"}`))
	updated := old.DeepCopy()
	updated.Finalizers = []string{"resource.kubernetes.io/delete-protection"}
	gvk := claimsGVR.GroupVersion().WithKind("ResourceClaim")
	if refused, msg := p.review(t, admission.Update, claimsGVR, gvk, updated, old); refused {
		t.Errorf("a finalizer on a claim refused: %s", msg)
	}
	changed := old.DeepCopy()
	changed.Spec.Devices.Requests[0].Name = "other"
	if refused, _ := p.review(t, admission.Update, claimsGVR, gvk, changed, old); !refused {
		t.Error("a spec change of an invalid claim admitted")
	}
}
