package harness

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/netclass-dev/netclass/api/contract"
	"github.com/netclass-dev/netclass/test/testbed"
	"github.com/netclass-dev/netclass/test/testbed/bed"
)

// AgentAttachment is one running attachment in netclass-dra's
// /debug/attachments: what its agent's last completed sync applied.
type AgentAttachment = contract.DebugAttachment

// Agent reads the daemon's /debug/attachments (on its health address, a
// loopback port of its node's network namespace): every running attachment
// of the node with the NetworkPolicies and NetworkQoS objects its agent
// applied in its last completed sync. The kernel held that sync's rules
// before the document showed it.
func (d *DRA) Agent(ctx context.Context) ([]AgentAttachment, error) {
	body, err := d.get(ctx, "/debug/attachments")
	if err != nil {
		return nil, err
	}
	defer body.Close()
	var doc contract.DebugAttachments
	if err := json.NewDecoder(body).Decode(&doc); err != nil {
		return nil, fmt.Errorf("netclass-dra on node %s: /debug/attachments: %w", d.Node, err)
	}
	if doc.Version != contract.DebugAttachmentsVersion {
		return nil, fmt.Errorf("netclass-dra on node %s: /debug/attachments version %q, want %q", d.Node, doc.Version, contract.DebugAttachmentsVersion)
	}
	return doc.Attachments, nil
}

// get GETs a path on the daemon's health address (where its /metrics is
// too), from inside its node's network namespace.
func (d *DRA) get(ctx context.Context, path string) (io.ReadCloser, error) {
	d.mu.Lock()
	addr := d.health
	d.mu.Unlock()
	if addr == "" {
		return nil, fmt.Errorf("netclass-dra on node %s is not running", d.Node)
	}
	client := &http.Client{Transport: &http.Transport{DialContext: dialIn(d.On), DisableKeepAlives: true}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("netclass-dra on node %s: %w", d.Node, err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("netclass-dra on node %s: GET %s: %s", d.Node, path, resp.Status)
	}
	return resp.Body, nil
}

// Metrics reads the daemon's /metrics: the value of every series without
// labels (go_goroutines, process_cpu_seconds_total,
// process_resident_memory_bytes, netclass_checkpoint_records…).
func (d *DRA) Metrics(ctx context.Context) (map[string]float64, error) {
	body, err := d.get(ctx, "/metrics")
	if err != nil {
		return nil, err
	}
	defer body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.HasPrefix(name, "#") || strings.Contains(name, "{") {
			continue
		}
		if v, err := strconv.ParseFloat(value, 64); err == nil {
			out[name] = v
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("netclass-dra on node %s: /metrics: %w", d.Node, err)
	}
	return out, nil
}

// WaitAgent waits until the daemon's agent shows what ok wants (its
// message says what is missing), at most WaitTimeout: the positive sign
// that the agent synced after a change, for a test whose next check would
// hold just as well before the change.
func (d *DRA) WaitAgent(t testing.TB, what string, ok func([]AgentAttachment) (bool, string)) {
	t.Helper()
	testbed.Poll(t, testbed.Context(t, WaitTimeout), 50*time.Millisecond, fmt.Sprintf("node %s's agent: %s", d.Node, what),
		func(ctx context.Context) (bool, string, error) {
			atts, err := d.Agent(ctx)
			if err != nil {
				return false, err.Error(), nil
			}
			done, missing := ok(atts)
			return done, missing, nil
		})
}

// AgentHas is a WaitAgent condition: each attachment (namespace/name of
// the pod → its interface's NetworkPolicies) is listed with exactly those
// policies, in order; nil is none. The QoS side is not looked at.
func AgentHas(ifname string, policies map[string][]string) func([]AgentAttachment) (bool, string) {
	return agentHas(ifname, policies, "NetworkPolicies", func(a AgentAttachment) []string { return a.NetworkPolicies })
}

// AgentHasMulti is AgentHas for the attachments' MultiNetworkPolicies.
func AgentHasMulti(ifname string, policies map[string][]string) func([]AgentAttachment) (bool, string) {
	return agentHas(ifname, policies, "MultiNetworkPolicies", func(a AgentAttachment) []string { return a.MultiNetworkPolicies })
}

// AgentHasCluster is AgentHas for the attachments' ClusterNetworkPolicies
// (in precedence order).
func AgentHasCluster(ifname string, policies map[string][]string) func([]AgentAttachment) (bool, string) {
	return agentHas(ifname, policies, "ClusterNetworkPolicies", func(a AgentAttachment) []string { return a.ClusterNetworkPolicies })
}

func agentHas(ifname string, policies map[string][]string, kind string, of func(AgentAttachment) []string) func([]AgentAttachment) (bool, string) {
	return func(atts []AgentAttachment) (bool, string) {
		var wrong []string
		for pod, want := range policies {
			a, found := findAttachment(atts, pod, ifname)
			switch {
			case !found:
				wrong = append(wrong, fmt.Sprintf("%s %s not listed", pod, ifname))
			case strings.Join(of(a), ",") != strings.Join(want, ","):
				wrong = append(wrong, fmt.Sprintf("%s %s: %s %v, want %v", pod, ifname, kind, of(a), want))
			}
		}
		return len(wrong) == 0, strings.Join(wrong, "; ")
	}
}

func findAttachment(atts []AgentAttachment, pod, ifname string) (AgentAttachment, bool) {
	for _, a := range atts {
		if a.Pod == pod && a.Interface == ifname {
			return a, true
		}
	}
	return AgentAttachment{}, false
}

// dialIn dials from inside the node's network namespace (node 1: this
// machine's): a socket stays in the namespace it was made in.
func dialIn(n bed.Node) func(ctx context.Context, network, addr string) (net.Conn, error) {
	var dialer net.Dialer
	if n.Primary() {
		return dialer.DialContext
	}
	return func(ctx context.Context, network, addr string) (c net.Conn, err error) {
		err = ns.WithNetNSPath(n.NetNSPath(), func(ns.NetNS) error {
			c, err = dialer.DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
}

// loopbackPort returns a free loopback address of the node's network
// namespace, for a daemon's health address.
func loopbackPort(n bed.Node) (string, error) {
	var addr string
	listen := func(ns.NetNS) error {
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			return err
		}
		addr = l.Addr().String()
		return l.Close()
	}
	var err error
	if n.Primary() {
		err = listen(nil)
	} else {
		err = ns.WithNetNSPath(n.NetNSPath(), listen)
	}
	if err != nil {
		return "", fmt.Errorf("a free loopback port on node %s: %w", n.Name, err)
	}
	return addr, nil
}
