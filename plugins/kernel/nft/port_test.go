package nft

import (
	"strings"
	"sync"
	"testing"

	"github.com/google/nftables"

	"github.com/netclass-dev/netclass/conf/qos"
	"github.com/netclass-dev/netclass/test/nstest"
)

func TestPortRulesMatchNftSyntax(t *testing.T) {
	n := nstest.New(t)
	c := conn(t, n)
	for _, h := range []string{"nc0123", "veth9f"} {
		if err := ApplyPortQoS(c, h, samplePlan()); err != nil {
			t.Fatal(err)
		}
	}
	got := nftList(t, n, "table", "bridge", PortQoSTable)
	for _, want := range []string{
		"type ifname : verdict",
		`"nc0123" : goto port/nc0123`,
		`"veth9f" : goto port/veth9f`,
		"type filter hook prerouting priority filter; policy accept;\n\t\tiifname vmap @ports\n\t}",
		"chain port/nc0123 {\n\t\ticmpv6 type 133-137 accept\n" +
			"\t\tip daddr @port/nc0123/r0_v4 tcp dport 80 goto port/nc0123/r0\n" +
			"\t\tip6 daddr @port/nc0123/r1_v6 meta l4proto udp goto port/nc0123/r1\n" +
			"\t\tip dscp set ef\n\t\tip6 dscp set ef\n\t}",
		"chain port/nc0123/r0 {\n\t\tip dscp set af22\n\t\tip6 dscp set af22\n\t\tlimit rate over 125000 bytes/second drop\n\t\taccept",
		"set port/veth9f/r0_v4 {\n\t\ttype ipv4_addr\n\t\tflags interval\n\t\telements = { 0.0.0.0-9.255.255.255, 11.0.0.0-255.255.255.255 }",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("nft list lacks %q:\n%s", want, got)
		}
	}
	for _, h := range []string{"nc0123", "veth9f"} {
		if err := CheckPortQoS(c, h, samplePlan()); err != nil {
			t.Errorf("CheckPortQoS(%s) right after ApplyPortQoS: %v", h, err)
		}
	}
}

func TestCheckPortQoSNoticesChanges(t *testing.T) {
	tests := []struct {
		name   string
		tamper []string // nft command run in the namespace
	}{
		{"rule chain flushed", []string{"flush", "chain", "bridge", PortQoSTable, "port/nc0123/r0"}},
		{"port chain flushed", []string{"flush", "chain", "bridge", PortQoSTable, "port/nc0123"}},
		{"rule added", []string{"add", "rule", "bridge", PortQoSTable, "port/nc0123", "accept"}},
		{"map entry removed", []string{"delete", "element", "bridge", PortQoSTable, "ports", `{ "nc0123" }`}},
		{"base chain flushed", []string{"flush", "chain", "bridge", PortQoSTable, "prerouting"}},
		{"base rule added", []string{"insert", "rule", "bridge", PortQoSTable, "prerouting", "accept"}},
		{"set element removed", []string{"delete", "element", "bridge", PortQoSTable, "port/nc0123/r0_v4", "{", "11.0.0.0-255.255.255.255", "}"}},
		{"table deleted", []string{"delete", "table", "bridge", PortQoSTable}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := nstest.New(t)
			c := conn(t, n)
			if err := ApplyPortQoS(c, "nc0123", samplePlan()); err != nil {
				t.Fatal(err)
			}
			if out, err := execIn(n, "nft", tc.tamper...); err != nil {
				t.Fatalf("tamper: %v\n%s", err, out)
			}
			if err := CheckPortQoS(c, "nc0123", samplePlan()); err == nil {
				t.Fatal("CheckPortQoS passed on a tampered table")
			}
			// A later ADD of another port repairs the shared part.
			if err := ApplyPortQoS(c, "nc4567", samplePlan()); err != nil {
				t.Fatalf("apply after tampering: %v", err)
			}
			if err := CheckPortQoS(c, "nc4567", samplePlan()); err != nil {
				t.Errorf("the port applied after tampering: %v", err)
			}
		})
	}
	t.Run("other plan", func(t *testing.T) {
		n := nstest.New(t)
		c := conn(t, n)
		if err := ApplyPortQoS(c, "nc0123", samplePlan()); err != nil {
			t.Fatal(err)
		}
		if err := CheckPortQoS(c, "nc0123", qos.Compile(&qos.Spec{DSCP: intp(10)})); err == nil {
			t.Fatal("CheckPortQoS passed against another plan")
		}
	})
}

func TestApplyPortReplacesAndDeleteIsIdempotent(t *testing.T) {
	n := nstest.New(t)
	c := conn(t, n)
	for _, h := range []string{"nc0123", "nc0123x"} { // a name that extends another's
		if err := ApplyPortQoS(c, h, samplePlan()); err != nil {
			t.Fatal(err)
		}
	}
	small := qos.Compile(&qos.Spec{DSCP: intp(10)})
	if err := ApplyPortQoS(c, "nc0123", small); err != nil {
		t.Fatalf("re-apply: %v", err)
	}
	if err := CheckPortQoS(c, "nc0123", small); err != nil {
		t.Fatalf("after re-apply: %v", err)
	}
	if got := nftList(t, n, "table", "bridge", PortQoSTable); strings.Contains(got, "port/nc0123/") {
		t.Errorf("re-apply left the old rule chains:\n%s", got)
	}
	for range 2 {
		if err := DeletePortQoS(c, "nc0123"); err != nil {
			t.Fatalf("DeletePortQoS: %v", err)
		}
	}
	if ok, err := HasPortQoS(c, "nc0123"); err != nil || ok {
		t.Fatalf("HasPortQoS after delete = %v, %v", ok, err)
	}
	if err := CheckPortQoS(c, "nc0123x", samplePlan()); err != nil {
		t.Errorf("deleting a port touched another: %v", err)
	}
	fresh := nstest.New(t)
	if err := DeletePortQoS(conn(t, fresh), "nc0123"); err != nil {
		t.Errorf("DeletePortQoS without the table: %v", err)
	}
}

func TestConcurrentPortsShareOneBase(t *testing.T) {
	n := nstest.New(t)
	ports := []string{"nca", "ncb", "ncc", "ncd", "nce", "ncf"}
	errs := make([]error, len(ports))
	var wg sync.WaitGroup
	for i, h := range ports {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = InNamespace(n.Path, func(c *nftables.Conn) error { return ApplyPortQoS(c, h, samplePlan()) })
		}()
	}
	wg.Wait()
	c := conn(t, n)
	for i, h := range ports {
		if errs[i] != nil {
			t.Fatalf("apply %s: %v", h, errs[i])
		}
		if err := CheckPortQoS(c, h, samplePlan()); err != nil {
			t.Errorf("port %s: %v", h, err)
		}
	}
}

// An admin's DSCP policy renders as nft writes it: per family and range
// left out, a re-marking rule before all others, NDP's accept included
// (here 41-45 and 47-63, 46
// allowed; nft lists DSCP ranges in hex), and CHECK accepts what it applied.
func TestPortRemarkMatchesNftSyntax(t *testing.T) {
	n := nstest.New(t)
	c := conn(t, n)
	zero := 0
	plan := qos.Compile(&qos.Spec{Policy: &qos.DSCPPolicy{Allowed: []qos.DSCPRange{{First: 0, Last: 40}, {First: 46, Last: 46}}, Remark: &zero}})
	if err := ApplyPortQoS(c, "nc0123", plan); err != nil {
		t.Fatal(err)
	}
	got := nftList(t, n, "table", "bridge", PortQoSTable)
	want := "chain port/nc0123 {\n" +
		"\t\tip dscp 0x29-0x2d ip dscp set cs0\n\t\tip dscp 0x2f-0x3f ip dscp set cs0\n" +
		"\t\tip6 dscp 0x29-0x2d ip6 dscp set cs0\n\t\tip6 dscp 0x2f-0x3f ip6 dscp set cs0\n" +
		"\t\ticmpv6 type 133-137 accept\n\t}"
	if !strings.Contains(got, want) {
		t.Errorf("nft list lacks %q:\n%s", want, got)
	}
	if err := CheckPortQoS(c, "nc0123", plan); err != nil {
		t.Errorf("CheckPortQoS right after ApplyPortQoS: %v", err)
	}
}
