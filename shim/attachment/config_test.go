package attachment

import (
	"strings"
	"testing"

	"github.com/netclass-dev/netclass/api/contract"
	"github.com/netclass-dev/netclass/conf/qos"
)

func TestParseConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		errs []string // every substring must appear; none: valid
	}{
		{name: "minimal", in: `{"apiVersion":"netclass.dev/v1alpha1","kind":"AttachmentConfig"}`},
		{name: "everything", in: `{"apiVersion":"netclass.dev/v1alpha1","kind":"AttachmentConfig",
			"interfaceName":"data0","mac":"02:00:00:00:00:01","ips":["10.1.1.5/24","fd00::5/64"],
			"qos":{"dscp":46,"egressRate":1000000,"egressBurst":100000}}`},
		{name: "wrong identity", in: `{"apiVersion":"v1","kind":"Pod"}`,
			errs: []string{`apiVersion: must be "netclass.dev/v1alpha1"`, `kind: must be "AttachmentConfig"`}},
		{name: "unknown field", in: `{"apiVersion":"netclass.dev/v1alpha1","kind":"AttachmentConfig","ifname":"x"}`,
			errs: []string{`ifname: is not a field of AttachmentConfig`}},
		{name: "a key in another case", in: `{"apiVersion":"netclass.dev/v1alpha1","kind":"AttachmentConfig","InterfaceName":"x","MAC":"02:00:00:00:00:01"}`,
			errs: []string{`InterfaceName: is not a field of AttachmentConfig (fields are case-sensitive)`, `MAC: is not a field`}},
		{name: "a key given twice", in: `{"apiVersion":"netclass.dev/v1alpha1","kind":"AttachmentConfig","interfaceName":"a","interfaceName":"b"}`,
			errs: []string{`interfaceName: is given twice`}},
		{name: "percent in the interface name", in: `{"apiVersion":"netclass.dev/v1alpha1","kind":"AttachmentConfig","interfaceName":"net%d"}`,
			errs: []string{`interfaceName: "net%d" must hold printable ASCII characters only`}},
		{name: "NUL in the interface name", in: `{"apiVersion":"netclass.dev/v1alpha1","kind":"AttachmentConfig","interfaceName":"net\u00001"}`,
			errs: []string{`must hold printable ASCII characters only`}},
		{name: "non-ASCII interface name", in: `{"apiVersion":"netclass.dev/v1alpha1","kind":"AttachmentConfig","interfaceName":"nét1"}`,
			errs: []string{`must hold printable ASCII characters only`}},
		{name: "trailing data", in: `{"apiVersion":"netclass.dev/v1alpha1","kind":"AttachmentConfig"} {}`,
			errs: []string{"trailing data"}},
		{name: "a stray bracket after it", in: `{"apiVersion":"netclass.dev/v1alpha1","kind":"AttachmentConfig"}]`,
			errs: []string{"trailing data"}},
		{name: "not an object", in: `[1]`, errs: []string{"decode AttachmentConfig"}},
		{name: "every field wrong at once", in: `{"apiVersion":"netclass.dev/v1alpha1","kind":"AttachmentConfig",
			"interfaceName":"eth0","mac":"01:00:5e:00:00:01","ips":["10.1.1.5","10.1.1.0/24","10.1.1.7/24","10.1.1.7/24","224.0.0.1/4"],
			"qos":{"dscp":64}}`,
			errs: []string{
				`interfaceName: "eth0" is taken`,
				`mac: must be a unicast MAC address, got "01:00:5e:00:00:01"`,
				`ips[0]: "10.1.1.5" is not an address in CIDR form`,
				`ips[1]: 10.1.1.0 is the network address of 10.1.1.0/24`,
				`ips[3]: 10.1.1.7 is listed twice`,
				`ips[4]: 224.0.0.1 is not a unicast address`,
				`qos.dscp`,
			}},
		{name: "qos keys in another case, at every level", in: `{"apiVersion":"netclass.dev/v1alpha1","kind":"AttachmentConfig",
			"qos":{"DSCP":46,"dſcp":1,"egress":[{"dscp":1,"Classifier":{},"bandwidth":{"Rate":5,"rate":5}},{"dscp":2,"classifier":{"to":[{"IPBlock":{}}],"ports":[{"Port":80,"protocol":"TCP"}]}}]}}`,
			errs: []string{`qos.DSCP: is not a field (fields are case-sensitive)`, `qos.dſcp: is not a field`,
				`qos.egress[0].Classifier: is not a field`, `qos.egress[0].bandwidth.Rate: is not a field`,
				`qos.egress[1].classifier.to[0].IPBlock: is not a field`, `qos.egress[1].classifier.ports[0].Port: is not a field`}},
		{name: "a qos key given twice", in: `{"apiVersion":"netclass.dev/v1alpha1","kind":"AttachmentConfig","qos":{"egress":[{"dscp":1,"dscp":2}]}}`,
			errs: []string{`qos.egress[0].dscp: is given twice`}},
		{name: "IPv4-mapped IPv6", in: `{"apiVersion":"netclass.dev/v1alpha1","kind":"AttachmentConfig","ips":["::ffff:10.1.1.5/120"],
			"qos":{"egress":[{"dscp":1,"classifier":{"to":[{"ipBlock":{"cidr":"::ffff:10.0.0.0/104","except":["::ffff:10.1.0.0/112"]}}]}}]}}`,
			errs: []string{`ips[0]: ::ffff:10.1.1.5 is an IPv4-mapped IPv6 address`,
				`qos.egress[0].classifier.to[0].ipBlock.cidr: "::ffff:10.0.0.0/104" is an IPv4-mapped IPv6 network`,
				`qos.egress[0].classifier.to[0].ipBlock.except[0]`}},
		{name: "long interface name", in: `{"apiVersion":"netclass.dev/v1alpha1","kind":"AttachmentConfig","interfaceName":"abcdefghijklmnop"}`,
			errs: []string{"interfaceName", "longer than 15"}},
		{name: "zero mac", in: `{"apiVersion":"netclass.dev/v1alpha1","kind":"AttachmentConfig","mac":"00:00:00:00:00:00"}`,
			errs: []string{"all-zero"}},
		{name: "infiniband mac", in: `{"apiVersion":"netclass.dev/v1alpha1","kind":"AttachmentConfig","mac":"00:00:00:00:fe:80:00:00:00:00:00:00:02:00:5e:10:00:00:00:01"}`,
			errs: []string{"must be a 6-byte Ethernet MAC address"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseConfig([]byte(tc.in))
			if len(tc.errs) == 0 {
				if err != nil {
					t.Fatalf("ParseConfig: %v", err)
				}
				if c.Kind != contract.AttachmentConfigKind {
					t.Fatalf("kind = %q", c.Kind)
				}
				return
			}
			if err == nil {
				t.Fatalf("ParseConfig accepted %s", tc.in)
			}
			for _, want := range tc.errs {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
		})
	}
}

func TestMerge(t *testing.T) {
	dscp10, dscp46 := 10, 46
	class := &contract.AttachmentConfig{InterfaceName: "data0", MAC: "02:00:00:00:00:01", QoS: qosSpec(&dscp10, 1000)}
	claim := &contract.AttachmentConfig{IPs: []string{"10.0.0.2/24"}, QoS: qosSpec(&dscp46, 0)}
	got := Merge(class, claim)
	if got.InterfaceName != "data0" || got.MAC != "02:00:00:00:00:01" || len(got.IPs) != 1 {
		t.Fatalf("Merge = %+v", got)
	}
	if got.QoS == nil || got.QoS.DSCP == nil || *got.QoS.DSCP != 46 || got.QoS.EgressRate != 1000 {
		t.Fatalf("Merge qos = %+v: want the claim's dscp over the class's rate", got.QoS)
	}
	if got.APIVersion != contract.AttachmentConfigAPIVersion || got.Kind != contract.AttachmentConfigKind {
		t.Fatalf("Merge lost the identity: %+v", got)
	}
	claim.IPs[0] = "changed"
	if got.IPs[0] != "10.0.0.2/24" {
		t.Fatal("Merge shares the IPs slice with its input")
	}
	if Merge(nil, nil) != nil {
		t.Fatal("Merge(nil, nil) != nil")
	}
}

func TestNetworkRef(t *testing.T) {
	pn := NetworkRef{Class: "netclass", Kind: "PodNetwork", Name: "blue"}
	net := NetworkRef{Class: "netclass-networks", Kind: "Network", Namespace: "tenant-a", Name: "red"}
	if pn.String() != "PodNetwork blue" || net.String() != "Network tenant-a/red" {
		t.Fatalf("String: %q, %q", pn, net)
	}
	if pn.CNIName() != "blue" || net.CNIName() != "tenant-a_red" {
		t.Fatalf("CNIName: %q, %q", pn.CNIName(), net.CNIName())
	}
}

func qosSpec(dscp *int, egressRate int64) *qos.Spec {
	s := &qos.Spec{DSCP: dscp}
	if egressRate > 0 {
		s.EgressRate, s.EgressBurst = egressRate, egressRate/10
	}
	return s
}
