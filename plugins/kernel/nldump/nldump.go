// Package nldump is the one wrapper every netlink dump of netclass goes
// through. The kernel flags a dump NLM_F_DUMP_INTR when the table changed
// while it was read; vishvananda/netlink then returns ErrDumpInterrupted with
// possibly inconsistent results. The dump is simply read again.
//
// Upstream's plugins/pkg/netlinksafe does the same for a fixed set of calls;
// netclass also dumps neighbours, classes and bridge ports, so one generic
// wrapper covers them all.
package nldump

import (
	"errors"

	"github.com/vishvananda/netlink"
)

// maxAttempts bounds the retries of a dump that keeps being interrupted.
const maxAttempts = 10

// Retry runs dump until it completes uninterrupted, at most maxAttempts times.
func Retry[T any](dump func() (T, error)) (T, error) {
	var (
		v   T
		err error
	)
	for range maxAttempts {
		v, err = dump()
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			return v, err
		}
	}
	return v, err
}
