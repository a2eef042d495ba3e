// Package nft owns netclass's nftables state: the per-attachment QoS table
// (DSCP marking and metered egress rules) in the pod's namespace, and the
// MAC spoof-check table on the host. Rules are built as data (pure, tested
// without a kernel), then sent in one atomic transaction through
// google/nftables, in process: no nft binary is executed.
package nft

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
)

// Open returns a connection to nftables in the namespace behind fd.
func Open(nsFd int) (*nftables.Conn, error) {
	c, err := nftables.New(nftables.WithNetNSFd(nsFd))
	if err != nil {
		return nil, fmt.Errorf("open nftables: %w", err)
	}
	return c, nil
}

// OpenCurrent returns a connection to nftables in the calling process's own
// namespace (where the plugin runs: the host side of attachments).
func OpenCurrent() (*nftables.Conn, error) {
	c, err := nftables.New()
	if err != nil {
		return nil, fmt.Errorf("open nftables: %w", err)
	}
	return c, nil
}

// ruleset is the complete content of one table.
type ruleset struct {
	table  *nftables.Table
	sets   []setWithElements
	chains []*nftables.Chain
	rules  map[string][][]expr.Any // chain name -> rules in order
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
	if err := c.Flush(); err != nil {
		return fmt.Errorf("install nftables table %q: %w", rs.table.Name, err)
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
