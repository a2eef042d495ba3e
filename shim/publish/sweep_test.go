package publish

import (
	"context"
	"errors"
	"slices"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type fakeSliceAPI struct {
	slices   []resourceapi.ResourceSlice
	nodes    map[string]bool
	failNode string
	deleted  []string
	lookups  int
}

func (f *fakeSliceAPI) Slices(context.Context, string) ([]resourceapi.ResourceSlice, error) {
	return f.slices, nil
}

func (f *fakeSliceAPI) NodeExists(_ context.Context, name string) (bool, error) {
	f.lookups++
	if name == f.failNode {
		return false, errors.New("boom")
	}
	return f.nodes[name], nil
}

func (f *fakeSliceAPI) DeleteSlice(_ context.Context, name string) error {
	f.deleted = append(f.deleted, name)
	return nil
}

func slice(name, driver, node string) resourceapi.ResourceSlice {
	s := resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourceapi.ResourceSliceSpec{Driver: driver}}
	if node != "" {
		s.Spec.NodeName = &node
	}
	return s
}

func TestSweepDeparted(t *testing.T) {
	api := &fakeSliceAPI{
		slices: []resourceapi.ResourceSlice{
			slice("here-1", "netclass.dev", "here"),
			slice("gone-1", "netclass.dev", "gone"),
			slice("gone-2", "netclass.dev", "gone"),
			slice("foreign", "other.example", "gone"),
			slice("all-nodes", "netclass.dev", ""),
			slice("broken", "netclass.dev", "flaky"),
		},
		nodes:    map[string]bool{"here": true},
		failNode: "flaky",
	}
	deleted, err := SweepDeparted(context.Background(), api, "netclass.dev")
	if err == nil {
		t.Error("the failing node lookup was not reported")
	}
	if !slices.Equal(deleted, []string{"gone-1", "gone-2"}) || !slices.Equal(api.deleted, deleted) {
		t.Fatalf("deleted %v (api saw %v), want gone-1 and gone-2", deleted, api.deleted)
	}
	if api.lookups != 3 {
		t.Errorf("%d node lookups, want one per node (3)", api.lookups)
	}
}
