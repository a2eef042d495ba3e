package qosstatus

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ncapply "github.com/netclass-dev/netclass/api/generated/applyconfigurations/netclass/v1alpha1"
	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/shim/ruleagent"
)

// stuckClient is an API server that answers a status write only when
// released, and records how many attachments each write reported.
type stuckClient struct {
	release chan struct{}
	wrote   chan int32
}

func (c *stuckClient) ApplyStatus(ctx context.Context, obj *ncapply.NetworkQoSApplyConfiguration, _ metav1.ApplyOptions) (*ncv1.NetworkQoS, error) {
	select {
	case <-c.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	c.wrote <- *obj.Status.Nodes[0].Attachments
	return &ncv1.NetworkQoS{}, nil
}

// The agent hands its outcomes over without waiting for the API server:
// while a write hangs, syncs go on; then the newest outcomes are written,
// the ones in between skipped; a write that hangs past the timeout ends.
func TestBackgroundNeverHoldsTheSync(t *testing.T) {
	client := &stuckClient{release: make(chan struct{}), wrote: make(chan int32, 10)}
	objs := []*ncv1.NetworkQoS{{ObjectMeta: metav1.ObjectMeta{Namespace: "t1", Name: "web"}}}
	b := &Background{Timeout: time.Minute, Writer: &Writer{Node: "n1", Now: time.Now,
		Objects: func() ([]*ncv1.NetworkQoS, error) { return objs, nil }, Client: func(string) Client { return client }}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go b.Run(ctx)
	outs := func(n int) []ruleagent.Outcome {
		var o []ruleagent.Outcome
		for range n {
			o = append(o, out("a", nil, "web"))
		}
		return o
	}
	done := make(chan struct{})
	go func() {
		for n := 1; n <= 5; n++ {
			b.Observe(ctx, outs(n)) // the first write hangs meanwhile
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Observe waited for the API server")
	}
	close(client.release)
	first := <-client.wrote
	last := first
	for last != 5 {
		select {
		case last = <-client.wrote:
		case <-time.After(10 * time.Second):
			t.Fatalf("the newest outcomes were never written (first write %d, last %d)", first, last)
		}
	}
}
