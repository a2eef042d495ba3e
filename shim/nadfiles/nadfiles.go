// Package nadfiles keeps, under netclass-dra's state directory, the rendered
// configuration of every network offered on the node (conf/nadfile), which
// the delegating plugin netclass-nad of a generated NetworkAttachmentDefinition
// runs: written atomically when it changes, removed when the network stops
// being offered.
package nadfiles

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/netclass-dev/netclass/conf/nadfile"
	"github.com/netclass-dev/netclass/conf/netconf"
	"github.com/netclass-dev/netclass/shim/network"
	"github.com/netclass-dev/netclass/shim/render"
)

// Dir is the directory the files are kept in: netclass-dra's
// <state-dir>/nad unless --nad-dir says otherwise (netclass-nad reads
// <its stateDir>/nad: the two must meet).
type Dir struct {
	Path string
	// AgentDir is the plugins' record store netclass-dra's agent covers
	// (--foreign-record-dir; "": none): a list keeping its records there
	// starts its ports closed, for the agent to open (render.NADConfList).
	AgentDir string
}

// Want renders the files the networks call for, by file name. SR-IOV
// networks have none: a VF is allocated to a claim, which a NAD cannot ask
// for. A network that does not render is left out, its problem returned.
func Want(nets []network.Network, agentDir string) (map[string][]byte, error) {
	out := map[string][]byte{}
	var errs []error
	for _, n := range nets {
		if n.Type == netconf.TypeSRIOV {
			continue
		}
		ref := nadfile.Ref{Namespace: n.Ref.Namespace, Name: n.Ref.Name}
		list, err := render.NADConfList(n, agentDir)
		var b []byte
		if err == nil {
			b, err = nadfile.Encode(ref, list)
		}
		if err == nil {
			out[ref.FileName()] = b
		}
		errs = append(errs, err)
	}
	return out, errors.Join(errs...)
}

// Sync makes the directory hold exactly the networks' files.
func (d Dir) Sync(nets []network.Network) error {
	want, err := Want(nets, d.AgentDir)
	errs := []error{err}
	dir := d.Path
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("nad files: %w", err)
	}
	for name, b := range want {
		errs = append(errs, writeIfChanged(filepath.Join(dir, name), b))
	}
	entries, err := os.ReadDir(dir)
	errs = append(errs, err)
	for _, e := range entries {
		// Stale files, and temporary ones a write cut short left (Sync
		// runs in one goroutine: none is being written now).
		stale := strings.HasSuffix(e.Name(), ".json") || strings.HasPrefix(e.Name(), ".tmp-")
		if _, keep := want[e.Name()]; keep || e.IsDir() || !stale {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("nad files: remove %s: %w", e.Name(), err))
		}
	}
	return errors.Join(errs...)
}

// writeIfChanged replaces path with b through a rename, so a reader sees
// the old file or the new one, never a part.
func writeIfChanged(path string, b []byte) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, b) {
		return nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return fmt.Errorf("nad file %s: %w", path, err)
	}
	_, werr := tmp.Write(b)
	serr := tmp.Sync()
	cerr := tmp.Close()
	if err := errors.Join(werr, serr, cerr, os.Chmod(tmp.Name(), 0o644)); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("nad file %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("nad file %s: %w", path, err)
	}
	return nil
}
