// Package nft owns netclass's nftables state. Rules are built as data (pure,
// tested without a kernel), then sent in one atomic transaction through
// google/nftables, in process: no nft binary is executed. Three kinds of
// state live here:
//
//   - a host port's QoS (port.go): DSCP marking and metered rules of an
//     attachment whose pod interface is a veth with its host end in a Linux
//     bridge. They live in one shared table of the host, `bridge
//     netclass_qos`, at bridge prerouting: a verdict map keyed by the input
//     interface sends each host end's frames to that port's chain, so a
//     frame costs one map lookup however many ports the host has (a table
//     per port would cost one base chain per port and frame). The pod has no
//     access to the host's namespace, so it cannot remove them, and a frame
//     dropped there has already left the pod's socket: the sender never sees
//     an error, as behind a metering switch port.
//     Why bridge prerouting and not the netdev ingress hook of the host end:
//     the pod's egress shaping redirects the host end's ingress to an IFB
//     (tc, which runs before netfilter's ingress hook), and the IFB hands the
//     shaped packet back with tc_skip_classify set, which skips the host
//     end's tc and netfilter ingress hooks alike (__netif_receive_skb_core);
//     the bridge's own hooks still see it.
//   - a pod interface's QoS (pod.go) when the attachment has no host end
//     (macvlan, ipvlan, a VLAN made in the pod, VF...): a `netdev` table in the pod's
//     namespace whose chain hooks the interface's egress (Linux 5.16+). A
//     drop there ends in dev_queue_xmit with NET_XMIT_DROP, which UDP and
//     TCP treat like a full queue (no error on the socket), unlike a drop
//     at the IP postrouting hook, which returns EPERM to the sender.
//   - the MAC spoof-check table on the host (spoofchk.go).
package nft

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/netclass-dev/netclass/plugins/kernel/netns"
)

// openIn returns a connection to nftables in the namespace behind fd. It
// keeps one socket for all its requests (a sync reads a table with a
// request per chain and set: a socket each, made in the namespace with its
// buffers, cost most of a pod's sync); the caller closes it with
// CloseLasting.
func openIn(nsFd int) (*nftables.Conn, error) {
	c, err := nftables.New(nftables.WithNetNSFd(nsFd), nftables.WithSockOptions(bigBuffers), nftables.AsLasting())
	if err != nil {
		return nil, fmt.Errorf("open nftables: %w", err)
	}
	return c, nil
}

// InNamespace runs fn with a connection to nftables in the network
// namespace at path (a pod's), closed when fn returns.
func InNamespace(path string, fn func(*nftables.Conn) error) error {
	target, err := netns.Open(path)
	if err != nil {
		return err
	}
	defer target.Close()
	c, err := openIn(int(target.Fd()))
	if err != nil {
		return err
	}
	defer c.CloseLasting()
	return fn(c)
}

// OpenCurrent returns a connection to nftables in the calling process's own
// namespace (where the plugin runs: the host side of attachments).
func OpenCurrent() (*nftables.Conn, error) {
	c, err := nftables.New(nftables.WithSockOptions(bigBuffers))
	if err != nil {
		return nil, fmt.Errorf("open nftables: %w", err)
	}
	return c, nil
}

// socketBuffer is the send and receive buffer of netclass's nftables
// sockets. A transaction is one sendmsg, and the kernel acknowledges each
// of its messages: a transaction for many ports overflows the default
// buffers (EMSGSIZE on the send; ENOBUFS on the acks of a transaction that
// was committed nonetheless).
const socketBuffer = 8 << 20

// bigBuffers sets the socket's buffers past the sysctl limits (the *FORCE
// options, for a process with CAP_NET_ADMIN, which netclass has). Without
// it the defaults stay: a SyncPorts transaction that does not fit fails,
// and its ports are synced one by one (the same result, slower).
func bigBuffers(c *netlink.Conn) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return nil
	}
	_ = raw.Control(func(fd uintptr) {
		_ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, socketBuffer)
		_ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, socketBuffer)
	})
	return nil
}

// ruleset is the complete content of one table.
type ruleset struct {
	table   *nftables.Table
	sets    []setWithElements
	chains  []*nftables.Chain
	rules   map[string][][]expr.Any // chain name -> rules in order
	lastSet uint32                  // the last set ID handed out in this transaction
	cache   *elementCache           // renders the address sets' elements (nil: each afresh)
	shared  sharedSets              // the sets allows may share (sharedsets.go)
}

// setID returns a set ID unique within the ruleset's transaction.
func (rs *ruleset) setID() uint32 {
	rs.lastSet++
	return rs.lastSet
}

type setWithElements struct {
	set      *nftables.Set
	elements []nftables.SetElement
}

// install creates the table with the ruleset in one transaction. When the
// table already exists it is replaced, also atomically. The common case
// (a new attachment) never deletes anything: in nf_tables a transaction
// that deletes waits for an RCU grace period, milliseconds, while one that
// only adds takes a fraction of one.
func install(c *nftables.Conn, rs *ruleset) error {
	c.CreateTable(rs.table) // fails the batch with EEXIST if the table exists
	if err := send(c, rs); !errors.Is(err, syscall.EEXIST) {
		return err
	}
	// Replace: the add before the delete keeps the delete valid if the
	// table vanished in between.
	c.AddTable(rs.table)
	c.DelTable(rs.table)
	c.AddTable(rs.table)
	return send(c, rs)
}

func send(c *nftables.Conn, rs *ruleset) error {
	if err := queue(c, rs); err != nil {
		return err
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("install nftables table %q: %w", rs.table.Name, err)
	}
	return nil
}

// queue adds the ruleset's chains, sets and rules to the pending batch.
func queue(c *nftables.Conn, rs *ruleset) error {
	for _, ch := range rs.chains {
		c.AddChain(ch)
	}
	for _, s := range rs.sets {
		if err := c.AddSet(s.set, s.elements); err != nil {
			return fmt.Errorf("add set %q: %w", s.set.Name, err)
		}
	}
	for _, ch := range rs.chains {
		for _, exprs := range rs.rules[ch.Name] {
			c.AddRule(&nftables.Rule{Table: rs.table, Chain: ch, Exprs: exprs})
		}
	}
	return nil
}

// deleteTable removes a table; a missing table is success.
func deleteTable(c *nftables.Conn, t *nftables.Table) error {
	c.DelTable(t)
	if err := c.Flush(); err != nil && !errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("delete nftables table %q: %w", t.Name, err)
	}
	return nil
}

// tableExists reports whether the table is present.
func tableExists(c *nftables.Conn, t *nftables.Table) (bool, error) {
	tables, err := c.ListTablesOfFamily(t.Family)
	if err != nil {
		return false, fmt.Errorf("list nftables tables: %w", err)
	}
	for _, got := range tables {
		if got.Name == t.Name {
			return true, nil
		}
	}
	return false, nil
}
