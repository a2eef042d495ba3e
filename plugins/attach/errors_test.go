package attach

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/netclass-dev/netclass/plugins/kernel/nft"
)

func TestInternalCodes(t *testing.T) {
	lacks := &nft.FeatureError{Feature: nft.PodEgressHook, Err: syscall.EOPNOTSUPP}
	tests := []struct {
		name string
		err  error
		code uint
		want string
	}{
		{"a kernel without the hook", fmt.Errorf("mark and meter %q: %w", "net1", lacks), types.ErrInvalidNetworkConfig,
			`mark and meter "net1": this kernel lacks the nftables netdev egress hook (Linux 5.16 or later)`},
		{"a CNI error stays", types.NewError(types.ErrInvalidNetNS, "gone", ""), types.ErrInvalidNetNS, "gone"},
		{"anything else", errors.New("boom"), types.ErrInternal, "boom"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var e *types.Error
			if !errors.As(Internal(tc.err, errors.New("undo failed")), &e) {
				t.Fatal("not a CNI error")
			}
			if e.Code != tc.code || !strings.Contains(e.Msg, tc.want) || !strings.Contains(e.Details, "undo failed") {
				t.Errorf("got %d %q %q, want code %d with %q and the undo failure", e.Code, e.Msg, e.Details, tc.code, tc.want)
			}
		})
	}
}
