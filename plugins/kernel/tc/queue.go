package tc

import (
	"errors"
	"fmt"
	"runtime"
	"syscall"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Queue kinds under a shaper, named as conf/qos names them.
const (
	QueueFQCodel = "fq_codel"
	QueueCake    = "cake"
	QueueTBF     = "tbf"
)

// fqCodelHandle is the fq_codel grafted under the tbf's only class (1:1).
var fqCodelHandle = netlink.MakeHandle(2, 0)

// MissingQdiscError: the kernel has no qdisc of the kind (its module is
// neither built in nor loadable). It is CNI error 7: the configuration asks
// for a queue this node's kernel cannot give, and retrying will not change it.
type MissingQdiscError struct {
	Kind string
	Err  error
}

func (e *MissingQdiscError) Error() string {
	return fmt.Sprintf("qos.queue: this kernel has no %s qdisc (sch_%s): %v", e.Kind, e.Kind, e.Err)
}

func (e *MissingQdiscError) Unwrap() error { return e.Err }

// InvalidConfiguration marks the error as CNI error 7 (plugins/attach).
func (e *MissingQdiscError) InvalidConfiguration() {}

// missing turns the kernel's answer to an unknown qdisc kind (ENOENT once
// the module request failed) into a *MissingQdiscError.
func missing(err error, kind string) error {
	if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.EOPNOTSUPP) {
		return &MissingQdiscError{Kind: kind, Err: err}
	}
	return err
}

// SetShaper shapes the link's egress at s's rate with queue under it,
// replacing its root qdisc: tbf alone; tbf with fq_codel (ECN on) as its
// child; or cake, whose own shaper takes the rate (it has no burst). A
// kernel without the queue's qdisc gets a *MissingQdiscError, with the link
// left as it was or shaped by tbf alone (the caller removes or keeps it).
func SetShaper(linkIndex int, s TBF, queue string) error {
	switch queue {
	case QueueCake:
		return missing(setRootCake(linkIndex, s.RateBytes), QueueCake)
	case QueueFQCodel:
		if err := SetRootTBF(linkIndex, s); err != nil {
			return err
		}
		if err := netlink.QdiscReplace(fqCodel(linkIndex)); err != nil {
			return missing(fmt.Errorf("add fq_codel under the tbf of link %d: %w", linkIndex, err), QueueFQCodel)
		}
		return nil
	case QueueTBF:
		return SetRootTBF(linkIndex, s)
	}
	return fmt.Errorf("unknown queue %q", queue)
}

func fqCodel(linkIndex int) *netlink.FqCodel {
	return &netlink.FqCodel{
		QdiscAttrs: netlink.QdiscAttrs{LinkIndex: linkIndex, Handle: fqCodelHandle, Parent: netlink.MakeHandle(1, 1)},
		ECN:        1, // mark ECN-capable packets instead of dropping them
	}
}

// HasQdisc reports whether the kernel can make a qdisc of the kind: it
// tries, as root qdisc of the loopback of a namespace of its own (on a
// thread that exits with it), so nothing outside changes.
func HasQdisc(kind string) (bool, error) {
	type answer struct {
		ok  bool
		err error
	}
	done := make(chan answer, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread and its namespace end with the goroutine
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			done <- answer{err: fmt.Errorf("probe for the %s qdisc: unshare: %w", kind, err)}
			return
		}
		err := probe(kind)
		var m *MissingQdiscError
		if errors.As(err, &m) {
			done <- answer{ok: false}
			return
		}
		done <- answer{ok: err == nil, err: err}
	}()
	a := <-done
	return a.ok, a.err
}

func probe(kind string) error {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("probe for the %s qdisc: %w", kind, err)
	}
	s := TBF{RateBytes: 125_000, BurstBytes: 10_000}
	if kind == QueueTBF {
		return SetRootTBF(lo.Attrs().Index, s)
	}
	return SetShaper(lo.Attrs().Index, s, kind)
}
