package nri

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"k8s.io/apimachinery/pkg/types"

	"github.com/netclass-dev/netclass/shim/attachment"
	"github.com/netclass-dev/netclass/shim/checkpoint"
	"github.com/netclass-dev/netclass/shim/cni"
)

// fakeCNI is the CNI runtime of these tests: it records every call and
// fails, blocks or warns as a test sets it to.
type fakeCNI struct {
	mu      sync.Mutex
	calls   []string
	failAdd map[string]error         // ifName → error
	block   bool                     // ADD waits for its context
	gate    map[string]chan struct{} // network → ADD waits until closed (or its context ends)
	cached  map[string]cni.Result
	gc      map[string][]string
	failDel int // the next failDel DELs fail
	// onDel, when set, is called at each DEL with its call.
	onDel func(call string)
	// warn are the plugins' warnings an ADD of the interface returns.
	warn map[string][]string
	// deadlines are the ADDs' context deadlines.
	deadlines []time.Time
}

func (f *fakeCNI) record(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, s)
}

// waitFor polls, with a deadline, until call was made.
func (f *fakeCNI) waitFor(t *testing.T, call string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !slices.Contains(f.Calls(), call) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in %v", call, f.Calls())
		}
		time.Sleep(5 * time.Millisecond) // polling a condition with a deadline
	}
}

func (f *fakeCNI) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func netName(conf []byte) string {
	var l struct{ Name string }
	json.Unmarshal(conf, &l)
	return l.Name
}

func (f *fakeCNI) Add(ctx context.Context, conf []byte, a cni.Attachment) (cni.Result, error) {
	f.record(fmt.Sprintf("ADD %s %s %s", netName(conf), a.ContainerID, a.IfName))
	if d, ok := ctx.Deadline(); ok {
		f.mu.Lock()
		f.deadlines = append(f.deadlines, d)
		f.mu.Unlock()
	}
	if f.block {
		<-ctx.Done()
		return cni.Result{}, ctx.Err()
	}
	if g, ok := f.gate[netName(conf)]; ok {
		select {
		case <-g:
		case <-ctx.Done():
			return cni.Result{}, ctx.Err()
		}
	}
	if err := f.failAdd[a.IfName]; err != nil {
		return cni.Result{}, err
	}
	return cni.Result{InterfaceName: a.IfName, MAC: "02:00:00:00:00:01", IPs: []string{"10.0.0." + a.IfName[3:] + "/24"}, Warnings: f.warn[a.IfName]}, nil
}

func (f *fakeCNI) Del(_ context.Context, conf []byte, a cni.Attachment) error {
	call := fmt.Sprintf("DEL %s %s %s", netName(conf), a.ContainerID, a.IfName)
	f.record(call)
	if f.onDel != nil {
		f.onDel(call)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failDel > 0 {
		f.failDel--
		return errors.New("plugin failed")
	}
	return nil
}

func (f *fakeCNI) GC(_ context.Context, conf []byte, valid []cni.Attachment) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gc == nil {
		f.gc = map[string][]string{}
	}
	var ids []string
	for _, v := range valid {
		ids = append(ids, v.ContainerID+"/"+v.IfName)
	}
	slices.Sort(ids)
	f.gc[netName(conf)] = ids
	return nil
}

func (f *fakeCNI) Cached(_ []byte, a cni.Attachment) (cni.Result, bool, error) {
	r, ok := f.cached[a.ContainerID+"/"+a.IfName]
	return r, ok, nil
}

type fakeReporter struct {
	mu       sync.Mutex
	statuses map[string][]string
	events   []string
}

func (f *fakeReporter) Attached(_ context.Context, c *checkpoint.Claim, failures map[string]error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var s []string
	for _, d := range c.Devices {
		if err := failures[d.Device]; err != nil {
			s = append(s, d.Device+" failed")
			continue
		}
		for _, a := range d.Attachments {
			if a.State == checkpoint.Attached {
				s = append(s, d.Device+" "+a.Result.InterfaceName)
			}
		}
	}
	if f.statuses == nil {
		f.statuses = map[string][]string{}
	}
	f.statuses[c.Name] = s
	return nil
}

func (f *fakeReporter) PodEvent(p checkpoint.Pod, eventType, reason, message string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, reason+": "+message)
}

func conf(name string) json.RawMessage {
	return json.RawMessage(`{"cniVersion":"1.1.0","name":"` + name + `","plugins":[{"type":"netclass-bridge"}]}`)
}

func claimRec(uid, name string, order int, pod types.UID, devices ...checkpoint.Device) *checkpoint.Claim {
	return &checkpoint.Claim{UID: types.UID(uid), Namespace: "ns", Name: name,
		Pods: []checkpoint.Pod{{UID: pod, Namespace: "ns", Name: "pod-" + string(pod), Order: order}}, Devices: devices}
}

func dev(name, ifName string) checkpoint.Device {
	return checkpoint.Device{Request: "r", Pool: "node", Device: name + "-dev", InterfaceName: ifName,
		Network: attachment.NetworkRef{Kind: "PodNetwork", Name: name}, ConfList: conf(name)}
}

type harness struct {
	store    *checkpoint.Store
	cni      *fakeCNI
	reporter *fakeReporter
	plugin   *Plugin
	timings  chan Timing
	netns    string
}

func newHarness(t *testing.T) *harness {
	store, problems := checkpoint.Open(t.TempDir())
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	h := &harness{store: store, cni: &fakeCNI{cached: map[string]cni.Result{}}, reporter: &fakeReporter{}, timings: make(chan Timing, 10)}
	h.plugin = NewPlugin(context.Background(), store, h.cni, h.reporter)
	h.plugin.Observer = func(tm Timing) { h.timings <- tm }
	h.netns = filepath.Join(t.TempDir(), "netns")
	os.WriteFile(h.netns, nil, 0o600)
	return h
}

func (h *harness) sandbox(id string, pod types.UID) *api.PodSandbox {
	return &api.PodSandbox{Id: id, Uid: string(pod), Namespace: "ns", Name: "pod-" + string(pod),
		Linux: &api.LinuxPodSandbox{Namespaces: []*api.LinuxNamespace{{Type: "network", Path: h.netns}}}}
}

func (h *harness) put(t *testing.T, c *checkpoint.Claim) {
	t.Helper()
	if err := h.store.Put(c); err != nil {
		t.Fatal(err)
	}
}

func (h *harness) timing(t *testing.T) Timing {
	t.Helper()
	select {
	case tm := <-h.timings:
		return tm
	case <-time.After(10 * time.Second):
		t.Fatal("no timing reported")
	}
	return Timing{}
}
