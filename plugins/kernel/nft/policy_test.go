package nft

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/netclass-dev/netclass/conf/netpol"
	"github.com/netclass-dev/netclass/conf/qos"
	"github.com/netclass-dev/netclass/test/nstest"
)

// policyBed is a server namespace with two interfaces: net1 (a netclass
// attachment) towards two clients, and eth0 (the primary network) towards
// a third.
type policyBed struct {
	server, c1, c2, primary *nstest.NS
}

func newPolicyBed(t *testing.T) *policyBed {
	b := &policyBed{server: nstest.New(t), c1: nstest.New(t), c2: nstest.New(t), primary: nstest.New(t)}
	nstest.Veth(t, b.server, "net1", "10.9.0.1/24", b.c1, "c1", "10.9.0.2/24")
	nstest.Veth(t, b.server, "net2", "10.9.1.1/24", b.c2, "c2", "10.9.1.2/24") // c2 reaches net1's peer side through its own link
	nstest.Veth(t, b.server, "eth0", "10.8.0.1/24", b.primary, "p", "10.8.0.2/24")
	return b
}

// listen accepts TCP connections on the server's addr:port until the test ends.
func listen(t *testing.T, n *nstest.NS, addr string, port int) {
	t.Helper()
	var l net.Listener
	n.Do(t, func() (err error) { l, err = net.Listen("tcp", fmt.Sprintf("%s:%d", addr, port)); return err })
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("ok"))
			c.Close()
		}
	}()
}

// connects reports whether a TCP connection from n to addr:port gets the
// server's reply (the reply crossing back proves conntrack lets it).
func connects(t *testing.T, n *nstest.NS, addr string, port int) bool {
	t.Helper()
	var ok bool
	n.Do(t, func() error {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("%s:%d", addr, port), 300*time.Millisecond)
		if err != nil {
			return nil
		}
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		buf := make([]byte, 2)
		_, err = c.Read(buf)
		ok = err == nil && string(buf) == "ok"
		return nil
	})
	return ok
}

func hostRange(a string) []qos.Range {
	ad := netip.MustParseAddr(a)
	return []qos.Range{{From: ad, To: ad}}
}

func TestPolicyEnforcedOnItsInterfaceOnly(t *testing.T) {
	b := newPolicyBed(t)
	c := conn(t, b.server)
	for _, addr := range []string{"10.9.0.1", "10.9.1.1", "10.8.0.1"} {
		for _, port := range []int{80, 81} {
			listen(t, b.server, addr, port)
		}
	}
	listen(t, b.c1, "10.9.0.2", 90)
	// ingress on net1: from c1 on TCP 80 only; egress on net1: nothing
	plan := &netpol.Plan{
		Ingress: netpol.Direction{Isolated: true, Allow: []netpol.Allow{{V4: hostRange("10.9.0.2"), V6: []qos.Range{},
			Ports: []netpol.PortRange{{Proto: 6, From: 80, To: 80}}}}},
		Egress: netpol.Direction{Isolated: true},
	}
	changed, err := SyncPolicy(c, "net1", plan)
	if err != nil || !changed {
		t.Fatalf("SyncPolicy: changed %v, %v", changed, err)
	}
	if err := CheckPolicy(c, "net1", plan); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		what       string
		from       *nstest.NS
		addr       string
		port       int
		wantOpened bool
	}{
		{"c1 to net1:80 (allowed; its reply passes the isolated egress)", b.c1, "10.9.0.1", 80, true},
		{"c1 to net1:81 (port not allowed)", b.c1, "10.9.0.1", 81, false},
		{"the primary interface is not filtered", b.primary, "10.8.0.1", 81, true},
		{"another netclass interface is not filtered", b.c2, "10.9.1.1", 81, true},
	} {
		if got := connects(t, tc.from, tc.addr, tc.port); got != tc.wantOpened {
			t.Errorf("%s: connected %v, want %v", tc.what, got, tc.wantOpened)
		}
	}
	if connects(t, b.server, "10.9.0.2", 90) {
		t.Error("the server opened a connection out of net1 although its egress allows nothing")
	}
	got := nftList(t, b.server, "table", "inet", PolicyTable("net1"))
	for _, want := range []string{
		`iifname "net1" jump ingress`, `oifname "net1" jump egress`,
		"ct state established,related accept", "ip saddr @ingress/a0_v4 tcp dport 80 accept", "\t\tdrop\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("nft list lacks %q:\n%s", want, got)
		}
	}

	// Opened to c1 on any port, in place; then nothing isolated: the table goes.
	wider := &netpol.Plan{Ingress: netpol.Direction{Isolated: true, Allow: []netpol.Allow{{V4: hostRange("10.9.0.2"), V6: []qos.Range{}}}}}
	if _, err := SyncPolicy(c, "net1", wider); err != nil {
		t.Fatal(err)
	}
	if !connects(t, b.c1, "10.9.0.1", 81) || !connects(t, b.server, "10.9.0.2", 90) {
		t.Error("the wider plan did not open port 81 and egress")
	}
	if changed, err := SyncPolicy(c, "net1", &netpol.Plan{}); err != nil || !changed {
		t.Fatalf("sync to an empty plan: %v, %v", changed, err)
	}
	if err := CheckPolicy(c, "net1", &netpol.Plan{}); err != nil {
		t.Error(err)
	}
	if changed, err := SyncPolicy(c, "net1", &netpol.Plan{}); err != nil || changed {
		t.Errorf("a second empty sync: changed %v, %v", changed, errors.Join(err))
	}
}

// No interface name makes a QoS table's name (the inet one DeletePodQoS
// removes included) a policy table's: removing one interface's QoS leaves
// another's policy in place.
func TestPolicyTableNeverCollidesWithQoS(t *testing.T) {
	n := podNS(t)
	c := conn(t, n)
	plan := &netpol.Plan{Ingress: netpol.Direction{Isolated: true}}
	if _, err := SyncPolicy(c, "net1", plan); err != nil {
		t.Fatal(err)
	}
	for _, other := range []string{"pol_net1", "-pol_net1", "net1"} {
		if err := DeletePodQoS(c, other); err != nil {
			t.Fatal(err)
		}
	}
	if err := CheckPolicy(c, "net1", plan); err != nil {
		t.Errorf("removing QoS tables took net1's policy: %v", err)
	}
}
