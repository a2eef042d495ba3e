package harness

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/netclass-dev/netclass/api/contract"
	"github.com/netclass-dev/netclass/test/nstest"
	"github.com/netclass-dev/netclass/test/testbed/bed"
)

// A daemon of a node in network namespaces of its own (node 2) serves
// /debug/attachments on a loopback port there: Agent reads it from inside
// that namespace, and AgentHas tells a listing from the one a test waits for.
func TestAgentOfANodeInItsNamespace(t *testing.T) {
	netns := nstest.New(t)
	node := bed.Node{Name: "node-2", NetNS: netns.Path, MntNS: "/proc/self/ns/mnt"}
	addr, err := loopbackPort(node)
	if err != nil {
		t.Fatal(err)
	}
	var ln net.Listener
	netns.Do(t, func() (err error) { ln, err = net.Listen("tcp4", addr); return err })
	doc := fmt.Sprintf(`{"version": %q, "attachments": [
		{"pod": "a/web", "interface": "net1", "network": "PodNetwork blue", "networkPolicies": ["deny", "web"]},
		{"pod": "a/client", "interface": "net1", "network": "PodNetwork blue", "networkQoS": ["gold"]}]}`, contract.DebugAttachmentsVersion)
	srv := &http.Server{ReadHeaderTimeout: time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/debug/attachments" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, doc)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	if c, err := net.DialTimeout("tcp4", addr, time.Second); err == nil {
		c.Close()
		t.Fatalf("%s answers in this machine's namespace: the test would not show Agent dials in the node's", addr)
	}
	d := &DRA{Node: node.Name, On: node, health: addr}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	atts, err := d.Agent(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(atts) != 2 || atts[1].Pod != "a/client" || strings.Join(atts[1].NetworkQoS, ",") != "gold" {
		t.Fatalf("attachments %+v", atts)
	}
	has := AgentHas("net1", map[string][]string{"a/web": {"deny", "web"}, "a/client": nil})
	if ok, missing := has(atts); !ok {
		t.Errorf("the listing is the wanted one, yet: %s", missing)
	}
	// a relabelled policy still listed: the agent has not applied the change
	has = AgentHas("net1", map[string][]string{"a/web": {"web"}, "a/other": nil})
	ok, missing := has(atts)
	if ok || !strings.Contains(missing, "a/web net1: NetworkPolicies [deny web], want [web]") || !strings.Contains(missing, "a/other net1 not listed") {
		t.Errorf("AgentHas = %v, %q", ok, missing)
	}
}
