package main

import (
	"errors"
	"fmt"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"

	"github.com/netclass-dev/netclass/plugins/kernel/nldump"
)

// flush is what a pod with CAP_NET_ADMIN can do against QoS or policy
// kept in its own network namespace: delete every nftables table and every
// qdisc (root and ingress/clsact) of every link it sees. It prints what it
// found and removed; a table or qdisc it may not remove is an error.
func flush() error {
	conn, err := nftables.New()
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	tables, err := conn.ListTables()
	if err != nil {
		return fmt.Errorf("list nftables tables: %w", err)
	}
	conn.FlushRuleset()
	if err := conn.Flush(); err != nil {
		return fmt.Errorf("flush the nftables ruleset: %w", err)
	}
	links, err := nldump.Retry(netlink.LinkList)
	if err != nil {
		return fmt.Errorf("list links: %w", err)
	}
	var errs []error
	deleted := 0
	for _, l := range links {
		qdiscs, err := nldump.Retry(func() ([]netlink.Qdisc, error) { return netlink.QdiscList(l) })
		errs = append(errs, err)
		for _, q := range qdiscs {
			a := q.Attrs()
			if a.Parent != netlink.HANDLE_ROOT && a.Parent != netlink.HANDLE_INGRESS && a.Parent != netlink.HANDLE_CLSACT {
				continue // a child goes with its root
			}
			if a.Handle == 0 || q.Type() == "noqueue" {
				continue // the link's default: nothing to delete
			}
			if err := netlink.QdiscDel(q); err != nil {
				errs = append(errs, fmt.Errorf("delete qdisc %s of %s: %w", q.Type(), l.Attrs().Name, err))
				continue
			}
			deleted++
		}
	}
	fmt.Printf("flushed %d nftables tables and %d qdiscs of %d links\n", len(tables), deleted, len(links))
	return errors.Join(errs...)
}
