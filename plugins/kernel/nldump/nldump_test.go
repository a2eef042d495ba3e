package nldump

import (
	"errors"
	"fmt"
	"testing"

	"github.com/vishvananda/netlink"
)

func TestRetry(t *testing.T) {
	other := errors.New("boom")
	tests := []struct {
		name      string
		errs      []error // returned by successive calls; the last repeats
		wantCalls int
		wantErr   error
	}{
		{"clean dump", []error{nil}, 1, nil},
		{"interrupted twice then clean", []error{netlink.ErrDumpInterrupted, netlink.ErrDumpInterrupted, nil}, 3, nil},
		{"wrapped interruption is retried", []error{fmt.Errorf("x: %w", netlink.ErrDumpInterrupted), nil}, 2, nil},
		{"other errors are not retried", []error{other}, 1, other},
		{"gives up", []error{netlink.ErrDumpInterrupted}, maxAttempts, netlink.ErrDumpInterrupted},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			v, err := Retry(func() (int, error) {
				e := tc.errs[min(calls, len(tc.errs)-1)]
				calls++
				return calls, e
			})
			if calls != tc.wantCalls || !errors.Is(err, tc.wantErr) || (err == nil && v != calls) {
				t.Fatalf("calls=%d err=%v v=%d, want calls=%d err=%v", calls, err, v, tc.wantCalls, tc.wantErr)
			}
		})
	}
}
