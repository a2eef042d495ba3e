package bwshare

import (
	"errors"
	"fmt"

	"github.com/netclass-dev/netclass/plugins/kernel/link"
	"github.com/netclass-dev/netclass/plugins/kernel/nft"
	"github.com/netclass-dev/netclass/plugins/kernel/tc"
)

// Join gives p its class in dev's tree (capacity bits/s), with dataDir the
// plugins' dataDir. The caller holds the VNI's lock.
func Join(dataDir, dev string, capacity int64, p Port) error {
	r, err := load(dataDir, dev)
	if err != nil {
		return err
	}
	if err := r.Add(capacity, p); err != nil {
		return err
	}
	return reconcile(dataDir, dev, r)
}

// Leave removes hostIf's class from dev's tree (none is success), and the
// tree with its table when no class is left. The caller holds the VNI's lock.
func Leave(dataDir, dev, hostIf string) error {
	r, err := load(dataDir, dev)
	if err != nil || r.Ports == nil {
		return err // no record: the device has no tree (a network without bandwidth)
	}
	delete(r.Ports, hostIf)
	return reconcile(dataDir, dev, r)
}

// reconcile prunes the record of host ends that are gone and makes dev's tree,
// table and record what it says.
func reconcile(dataDir, dev string, r Record) error {
	r.Prune(func(h string) bool {
		_, err := link.ByName(h)
		return !link.IsNotFound(err)
	})
	if len(r.Ports) == 0 {
		if err := remove(dev); err != nil {
			return err // the record stays: the next Join or Leave removes what is left
		}
		return save(dataDir, dev, r)
	}
	// The record first: whatever apply leaves behind on failure, the
	// record names it, and the next Join or Leave (the undo) repairs it.
	if err := save(dataDir, dev, r); err != nil {
		return err
	}
	return apply(dev, r)
}

func apply(dev string, r Record) error {
	l, err := link.ByName(dev)
	if err != nil {
		return fmt.Errorf("shared scheduler of %q: %w", dev, err)
	}
	share, classes := Render(r)
	if err := tc.SetShare(l.Attrs().Index, share); err != nil {
		return fmt.Errorf("shared scheduler of %q: %w", dev, err)
	}
	c, err := nft.OpenCurrent()
	if err != nil {
		return err
	}
	if err := nft.ApplyShare(c, dev, classes, tc.ShareClassID(tc.ShareDefaultMinor)); err != nil {
		return fmt.Errorf("classify the frames of %q: %w", dev, err)
	}
	return nil
}

// remove deletes dev's tree and table; none is success.
func remove(dev string) error {
	var errs []error
	l, err := link.ByName(dev)
	switch {
	case err == nil:
		errs = append(errs, tc.DeleteShare(l.Attrs().Index))
	case !link.IsNotFound(err):
		errs = append(errs, err)
	}
	c, err := nft.OpenCurrent()
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	return errors.Join(append(errs, nft.DeleteShare(c, dev))...)
}

// Check verifies that hostIf has its class in dev's record (none: only
// the rest) and that dev's tree and table are what the record says. The
// caller holds the VNI's lock.
func Check(dataDir, dev, hostIf string) error {
	r, err := load(dataDir, dev)
	if err != nil {
		return err
	}
	if _, ok := r.Ports[hostIf]; hostIf != "" && !ok {
		return fmt.Errorf("host end %q has no class in the shared scheduler of %q", hostIf, dev)
	}
	if len(r.Ports) == 0 {
		return nil
	}
	l, err := link.ByName(dev)
	if err != nil {
		return fmt.Errorf("shared scheduler of %q: %w", dev, err)
	}
	share, classes := Render(r)
	got, err := tc.ShareClasses(l.Attrs().Index)
	if err != nil {
		return err
	}
	if len(got) != len(share.Classes)+2 {
		return fmt.Errorf("shared scheduler of %q has %d classes, want %d", dev, len(got), len(share.Classes)+2)
	}
	c, err := nft.OpenCurrent()
	if err != nil {
		return err
	}
	return nft.CheckShare(c, dev, classes, tc.ShareClassID(tc.ShareDefaultMinor))
}
