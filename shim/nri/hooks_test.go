package nri

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/netclass-dev/netclass/api/contract"
	"github.com/netclass-dev/netclass/shim/checkpoint"
)

type hookLog struct {
	mu  sync.Mutex
	got []string
}

func (h *hookLog) ObserveHook(hook, result string, took time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if took < 0 {
		result += " (negative duration)"
	}
	h.got = append(h.got, hook+" "+result)
}

func (h *hookLog) seen() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.got...)
}

// Every hook reports its outcome: success, error, or skipped for sandboxes
// without netclass attachments. A failed DEL is reported but not returned.
func TestHooksReportTheirOutcome(t *testing.T) {
	h := newHarness(t)
	log := &hookLog{}
	h.plugin.Hooks = log
	h.plugin.RetryBase = time.Millisecond // the failed DEL below is retried (and succeeds) in the background
	h.put(t, claimRec("c1", "a", 0, "p", dev("blue", "")))
	h.put(t, claimRec("c2", "b", 0, "q", dev("red", "")))
	ctx := context.Background()
	if err := h.plugin.RunPodSandbox(ctx, h.sandbox("sb1", "p")); err != nil {
		t.Fatal(err)
	}
	if err := h.plugin.RunPodSandbox(ctx, h.sandbox("sb9", "nobody")); err != nil {
		t.Fatal(err)
	}
	h.cni.failAdd = map[string]error{"net1": errors.New("no addresses left")}
	if err := h.plugin.RunPodSandbox(ctx, h.sandbox("sb2", "q")); err == nil {
		t.Fatal("a failed ADD was not returned to the runtime")
	}
	h.plugin.Wait()
	h.cni.mu.Lock()
	h.cni.failDel = 1
	h.cni.mu.Unlock()
	if err := h.plugin.StopPodSandbox(ctx, h.sandbox("sb1", "p")); err != nil {
		t.Fatalf("StopPodSandbox returned %v: the runtime only logs it, the DEL is retried", err)
	}
	if err := h.plugin.RemovePodSandbox(ctx, h.sandbox("sb9", "nobody")); err != nil {
		t.Fatal(err)
	}
	if _, err := h.plugin.Synchronize(ctx, nil, nil); err != nil {
		t.Fatal(err)
	}
	h.plugin.Wait()
	h.plugin.WaitRetries()
	want := []string{
		"RunPodSandbox success", "RunPodSandbox skipped", "RunPodSandbox error",
		"StopPodSandbox error", "RemovePodSandbox skipped", "Synchronize success",
	}
	if got := log.seen(); !slices.Equal(got, want) {
		t.Fatalf("hooks observed %q, want %q", got, want)
	}
}

// A sandbox whose ADD failed and was rolled back is forgotten: kubelet
// retries with a new sandbox, and nothing of the old one is kept.
func TestFailedSandboxForgotten(t *testing.T) {
	h := newHarness(t)
	h.put(t, claimRec("c2", "b", 0, "q", dev("red", "")))
	h.cni.failAdd = map[string]error{"net1": errors.New("no addresses left")}
	if err := h.plugin.RunPodSandbox(context.Background(), h.sandbox("sb2", "q")); err == nil {
		t.Fatal("a failed ADD was not returned to the runtime")
	}
	h.plugin.Wait()
	h.plugin.epochs.mu.Lock()
	defer h.plugin.epochs.mu.Unlock()
	if len(h.plugin.epochs.attached) != 0 {
		t.Errorf("sandboxes kept after their rollback: %v", h.plugin.epochs.attached)
	}
}

// A pod gets at most contract.MaxInterfacesPerPod interfaces from its claims,
// however many claims of however many devices it lists.
func TestPlanBoundsInterfacesPerPod(t *testing.T) {
	var claims []*checkpoint.Claim
	for i := range contract.MaxInterfacesPerPod + 1 {
		claims = append(claims, claimRec(fmt.Sprint("c", i), fmt.Sprint("claim", i), i, "p", dev(fmt.Sprint("n", i), "")))
	}
	if steps, err := Plan(claims[:contract.MaxInterfacesPerPod], "p"); err != nil || len(steps) != contract.MaxInterfacesPerPod {
		t.Fatalf("%d interfaces: %d steps, %v", contract.MaxInterfacesPerPod, len(steps), err)
	}
	if _, err := Plan(claims, "p"); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("ask for %d interfaces", contract.MaxInterfacesPerPod+1)) {
		t.Errorf("one interface too many: %v", err)
	}
}
