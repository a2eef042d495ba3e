package cnitest

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/netip"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/netclass-dev/netclass/test/nstest"
)

// Pod is a container sandbox: its own namespace and a container ID.
type Pod struct {
	ID string
	NS *nstest.NS
	// Args is the CNI_ARGS of its calls (e.g. "K8S_POD_NAMESPACE=a;K8S_POD_NAME=b").
	Args string
}

// NewPod creates a pod namespace with a fresh container ID.
func NewPod(t testing.TB) *Pod {
	t.Helper()
	b := make([]byte, 8)
	rand.Read(b)
	return &Pod{ID: "ctr-" + hex.EncodeToString(b), NS: nstest.New(t)}
}

// Call builds a call of plugin for this pod's interface.
func (p *Pod) Call(plugin, command, ifname string, conf []byte) Call {
	return Call{Plugin: plugin, Command: command, ContainerID: p.ID, NetNS: p.NS.Path, IfName: ifname, Args: p.Args, Conf: conf}
}

// Add runs ADD and decodes the result (the test fails on error).
func (h *Host) Add(t testing.TB, plugin string, conf []byte, p *Pod, ifname string) *current.Result {
	t.Helper()
	out, err := h.Exec(p.Call(plugin, "ADD", ifname, conf))
	if err != nil {
		t.Fatalf("%s ADD %s/%s: %v", plugin, p.ID, ifname, err)
	}
	res, err := current.NewResult(out)
	if err != nil {
		t.Fatalf("%s ADD result %s: %v", plugin, out, err)
	}
	return res.(*current.Result)
}

// Del runs DEL.
func (h *Host) Del(plugin string, conf []byte, p *Pod, ifname string) error {
	_, err := h.Exec(p.Call(plugin, "DEL", ifname, conf))
	return err
}

// Check runs CHECK with prev as prevResult.
func (h *Host) Check(t testing.TB, plugin string, conf []byte, prev *current.Result, p *Pod, ifname string) error {
	t.Helper()
	_, err := h.Exec(p.Call(plugin, "CHECK", ifname, WithField(t, conf, "prevResult", prev)))
	return err
}

// GC runs GC keeping the given attachments.
func (h *Host) GC(t testing.TB, plugin string, conf []byte, valid ...types.GCAttachment) error {
	t.Helper()
	if valid == nil {
		valid = []types.GCAttachment{}
	}
	_, err := h.Exec(Call{Plugin: plugin, Command: "GC", Conf: WithField(t, conf, "cni.dev/valid-attachments", valid)})
	return err
}

// Attachment names the pod's interface for GC.
func (p *Pod) Attachment(ifname string) types.GCAttachment {
	return types.GCAttachment{ContainerID: p.ID, IfName: ifname}
}

// WithField returns conf with one top-level field set.
func WithField(t testing.TB, conf []byte, key string, v any) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(conf, &m); err != nil {
		t.Fatalf("decode conf: %v", err)
	}
	m[key] = v
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Addr returns the result's first address of the family (IPv6 or IPv4);
// the test fails without one.
func Addr(t testing.TB, r *current.Result, v6 bool) netip.Addr {
	t.Helper()
	for _, ipc := range r.IPs {
		if a, ok := netip.AddrFromSlice(ipc.Address.IP); ok && a.Unmap().Is6() == v6 {
			return a.Unmap()
		}
	}
	t.Fatalf("no IPv6=%v address in %v", v6, r.IPs)
	return netip.Addr{}
}
