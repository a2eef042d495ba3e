// Package netns is the one place netclass runs code inside another network
// namespace. Everything that touches a pod's namespace goes through Do or
// Open, so thread locking and "the namespace is gone" are handled once.
package netns

import (
	"errors"
	"fmt"
	"os"
	"runtime"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netns"
)

// ErrNotFound reports that the namespace no longer exists (the pod is gone).
var ErrNotFound = errors.New("network namespace not found")

// Do runs fn on a thread switched into the namespace at path.
func Do(path string, fn func() error) error {
	target, err := Open(path)
	if err != nil {
		return err
	}
	defer target.Close()
	return target.Do(func(ns.NetNS) error { return fn() })
}

// Open returns a handle on the namespace at path, for APIs that take a
// namespace file descriptor (netlink handles, nftables connections).
func Open(path string) (ns.NetNS, error) {
	if path == "" {
		return nil, fmt.Errorf("open netns: no path: %w", ErrNotFound)
	}
	target, err := ns.GetNS(path)
	if err != nil {
		var notExist ns.NSPathNotExistErr
		var notNS ns.NSPathNotNSErr
		if errors.As(err, &notExist) || errors.As(err, &notNS) {
			return nil, fmt.Errorf("open netns %q: %w", path, ErrNotFound)
		}
		return nil, fmt.Errorf("open netns %q: %w", path, err)
	}
	return target, nil
}

// Current returns the namespace of the calling thread (the "host" side of
// an attachment: wherever the plugin runs).
func Current() (ns.NetNS, error) {
	cur, err := ns.GetCurrentNS()
	if err != nil {
		return nil, fmt.Errorf("open current netns: %w", err)
	}
	return cur, nil
}

// NamedPath is where `ip netns` keeps the named namespace name.
func NamedPath(name string) string { return "/var/run/netns/" + name }

// CreateNamed makes the named namespace (as `ip netns add`) without leaving
// the calling thread in it, and returns its path. It is for the demo and the
// tests, which make the namespaces of their "nodes" and "pods".
func CreateNamed(name string) (string, error) {
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return "", fmt.Errorf("create netns %q: %w", name, err)
	}
	defer orig.Close()
	h, err := netns.NewNamed(name)
	if err != nil {
		// NewNamed may have switched before failing: restore or lose the thread.
		if netns.Set(orig) == nil {
			runtime.UnlockOSThread()
		}
		return "", fmt.Errorf("create netns %q: %w", name, err)
	}
	h.Close()
	if err := netns.Set(orig); err != nil {
		return "", fmt.Errorf("create netns %q: return to the original netns: %w", name, err) // thread stays locked and dies
	}
	runtime.UnlockOSThread()
	return NamedPath(name), nil
}

// DeleteNamed removes the named namespace (and every link inside it); one
// already deleted is success.
func DeleteNamed(name string) error {
	if err := netns.DeleteNamed(name); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("delete netns %q: %w", name, err)
	}
	return nil
}
