package attachment

import (
	"encoding/json"
	"testing"

	"github.com/netclass-dev/netclass/conf/netconf"
)

func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{
		`{"apiVersion":"netclass.dev/v1alpha1","kind":"AttachmentConfig"}`,
		`{"apiVersion":"netclass.dev/v1alpha1","kind":"AttachmentConfig","interfaceName":"net7","mac":"02:00:00:00:00:01","ips":["10.1.1.5/24"],"qos":{"dscp":46,"egress":[{"priority":1,"dscp":10,"classifier":{"to":[{"ipBlock":{"cidr":"10.0.0.0/8"}}]}}]}}`,
		`{"ips":["fd00::1/64","fd00::1/64"]}`,
		`{"mac":"zz"}`,
		`{"apiVersion":"netclass.dev/v1alpha1","kind":"AttachmentConfig","InterfaceName":"x","interfaceName":"y"}`,
		`{"apiVersion":"netclass.dev/v1alpha1","kind":"AttachmentConfig","interfaceName":"n%d","mac":"00:00:00:00:00:00"}`,
		`{"apiVersion":"netclass.dev/v1alpha1","kind":"AttachmentConfig","interfaceName":"net\u00001"}`,
		`null`,
		``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, err := ParseConfig(raw)
		if err != nil {
			return
		}
		// Keys are exact: a valid config has only known keys, each once.
		var keys map[string]json.RawMessage
		if json.Unmarshal(raw, &keys) != nil {
			t.Fatalf("accepted a non-object %q", raw)
		}
		for k := range keys {
			if !configKeys[k] {
				t.Fatalf("accepted the key %q", k)
			}
		}
		if c.InterfaceName != "" && netconf.ValidateIfName("interfaceName", c.InterfaceName) != nil {
			t.Fatalf("accepted the interface name %q", c.InterfaceName)
		}
		// A valid config survives a round trip and stays valid.
		out, err := json.Marshal(c)
		if err != nil {
			t.Fatalf("marshal %+v: %v", c, err)
		}
		if _, err := ParseConfig(out); err != nil {
			t.Fatalf("round trip of %s: %v", out, err)
		}
		if m := Merge(c, c); Validate(m) != nil {
			t.Fatalf("Merge of a valid config is invalid: %v", Validate(m))
		}
	})
}
