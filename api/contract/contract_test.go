package contract

import (
	"encoding/json"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	cniversion "github.com/containernetworking/cni/pkg/version"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/netclass-dev/netclass/conf/qos"
	"github.com/netclass-dev/netclass/plugins/attach"
)

var (
	dnsSubdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	cIdentifier  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// Every attribute is a fully qualified DRA attribute name in the domain it
// belongs to: <domain>/<C identifier>, within the API server's limits.
func TestAttributes(t *testing.T) {
	for _, tc := range []struct {
		name   resourceapi.QualifiedName
		domain string
	}{
		{AttributeStdPodNetwork, StandardAttributeDomain},
		{AttributeStdPodNetworkNamespace, StandardAttributeDomain},
		{AttributeStdNetworkClass, StandardAttributeDomain},
		{AttributePodNetwork, DriverName},
		{AttributeType, DriverName},
		{AttributeKind, DriverName},
		{AttributeClusterNetwork, DriverName},
		{AttributeVNI, DriverName},
		{AttributeVLANID, DriverName},
		{AttributeMaster, DriverName},
	} {
		domain, id, ok := strings.Cut(string(tc.name), "/")
		switch {
		case !ok || domain != tc.domain:
			t.Errorf("%s: domain %q, want %q", tc.name, domain, tc.domain)
		case len(domain) > resourceapi.DeviceMaxDomainLength || !dnsSubdomain.MatchString(domain):
			t.Errorf("%s: domain %q is not a DNS subdomain of at most %d characters", tc.name, domain, resourceapi.DeviceMaxDomainLength)
		case len(id) > resourceapi.DeviceMaxIDLength || !cIdentifier.MatchString(id):
			t.Errorf("%s: %q is not a C identifier of at most %d characters", tc.name, id, resourceapi.DeviceMaxIDLength)
		}
	}
	if !dnsSubdomain.MatchString(DriverName) {
		t.Errorf("driver name %q is not a DNS subdomain", DriverName)
	}
}

// The claim status data has the proposals' keys; a cluster-scoped network has no
// namespace key; netclass's one addition, pods, is there only for a claim
// several pods share.
func TestClaimStatusData(t *testing.T) {
	for _, tc := range []struct {
		in   ClaimStatusData
		want string
	}{
		{ClaimStatusData{PodNetwork: "blue", NetworkClass: "netclass"}, `{"podNetwork":"blue","networkClass":"netclass"}`},
		{ClaimStatusData{PodNetwork: "red", PodNetworkNamespace: "tenant-a", NetworkClass: "nets"},
			`{"podNetwork":"red","podNetworkNamespace":"tenant-a","networkClass":"nets"}`},
		{ClaimStatusData{PodNetwork: "blue", NetworkClass: "netclass", Pods: []PodInterface{{UID: "u1", Name: "a", InterfaceName: "net1", IPs: []string{"10.0.0.2/24"}}}},
			`{"podNetwork":"blue","networkClass":"netclass","pods":[{"uid":"u1","name":"a","interfaceName":"net1","ips":["10.0.0.2/24"]}]}`},
		{ClaimStatusData{PodNetwork: "blue", NetworkClass: "netclass", Bandwidth: "30M"}, `{"podNetwork":"blue","networkClass":"netclass","bandwidth":"30M"}`},
		{ClaimStatusData{PodNetwork: "blue", NetworkClass: "netclass", PodsOmitted: 3}, `{"podNetwork":"blue","networkClass":"netclass","podsOmitted":3}`},
	} {
		got, err := json.Marshal(tc.in)
		if err != nil || string(got) != tc.want {
			t.Errorf("marshal %+v = %s, %v; want %s", tc.in, got, err, tc.want)
		}
	}
	// Each key of the data is the name of a standard attribute, but pods,
	// podsOmitted and bandwidth (the consumable capacity's name).
	std := map[string]bool{"pods": true, "podsOmitted": true, CapacityBandwidth: true}
	for _, a := range []resourceapi.QualifiedName{AttributeStdPodNetwork, AttributeStdPodNetworkNamespace, AttributeStdNetworkClass} {
		std[strings.TrimPrefix(string(a), StandardAttributeDomain+"/")] = true
	}
	typ := reflect.TypeFor[ClaimStatusData]()
	for i := range typ.NumField() {
		key, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		if !std[key] {
			t.Errorf("claim status data key %q is not the name of a standard attribute", key)
		}
	}
	if typ.NumField() != len(std) {
		t.Errorf("claim status data has %d keys, the standard attributes, pods, podsOmitted and bandwidth are %d", typ.NumField(), len(std))
	}
}

// An AttachmentConfig encodes with its identity and exactly its documented
// keys; unset optional fields are left out.
func TestAttachmentConfig(t *testing.T) {
	dscp := 46
	for _, tc := range []struct {
		in   AttachmentConfig
		want string
	}{
		{AttachmentConfig{APIVersion: AttachmentConfigAPIVersion, Kind: AttachmentConfigKind},
			`{"apiVersion":"netclass.dev/v1alpha1","kind":"AttachmentConfig"}`},
		{AttachmentConfig{APIVersion: AttachmentConfigAPIVersion, Kind: AttachmentConfigKind, InterfaceName: "net7",
			MAC: "02:00:00:00:00:01", IPs: []string{"10.1.1.5/24"}, QoS: &qos.Spec{DSCP: &dscp}},
			`{"apiVersion":"netclass.dev/v1alpha1","kind":"AttachmentConfig","interfaceName":"net7","mac":"02:00:00:00:00:01","ips":["10.1.1.5/24"],"qos":{"dscp":46}}`},
	} {
		got, err := json.Marshal(tc.in)
		if err != nil || string(got) != tc.want {
			t.Errorf("marshal = %s, %v; want %s", got, err, tc.want)
		}
	}
}

// The CNI version is one libcni knows and every netclass plugin speaks.
func TestCNIVersion(t *testing.T) {
	if !slices.Contains(cniversion.All.SupportedVersions(), CNIVersion) {
		t.Errorf("libcni does not support CNI version %s (it supports %v)", CNIVersion, cniversion.All.SupportedVersions())
	}
	if !slices.Contains(attach.Versions().SupportedVersions(), CNIVersion) {
		t.Errorf("the plugins do not speak CNI version %s (they speak %v)", CNIVersion, attach.Versions().SupportedVersions())
	}
}
