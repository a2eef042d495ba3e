package nodedevices

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"

	"github.com/netclass-dev/netclass/plugins/attach"
)

const (
	// StateFileName is the engine's state file's name in netclass-dra's
	// state directory.
	StateFileName = "node-devices.json"
	// StateVersion is the format version of the engine's state file.
	StateVersion = 1
)

// state is the engine's state file: what it must still know of a network
// after netclass-dra restarts, when the network may be gone and its config
// with it.
type state struct {
	Version int `json:"version"`
	// DataDirs is, by bridge, the dataDir a network's config named beyond
	// the engine's DataDirs: the engine locks there, and removes the lock
	// file there, when it removes the network's devices.
	DataDirs map[string]string `json:"dataDirs,omitempty"`
}

// load reads the state file once, before the engine's first Sync. A file
// it cannot read is reported and the engine goes on without it: it then
// locks in its DataDirs only for a gone network that named another (as
// before the file existed); the next save replaces the file.
func (e *Engine) load() error {
	if e.loaded || e.StateFile == "" {
		return nil
	}
	e.loaded = true
	data, err := os.ReadFile(e.StateFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read node devices' state: %w", err)
	}
	var s state
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("decode node devices' state %s: %w", e.StateFile, err)
	}
	if s.Version != StateVersion {
		return fmt.Errorf("node devices' state %s has format version %d; this netclass-dra reads version %d", e.StateFile, s.Version, StateVersion)
	}
	e.own, e.saved = s.DataDirs, maps.Clone(s.DataDirs)
	return nil
}

// save writes the state file when what it holds changed since it was read
// or last written. Like the plugins' records it is not fsynced: the
// devices it describes do not outlive a reboot either.
func (e *Engine) save() error {
	if e.StateFile == "" || maps.Equal(e.own, e.saved) {
		return nil
	}
	data, err := json.Marshal(state{Version: StateVersion, DataDirs: e.own})
	if err != nil {
		return err
	}
	if err := attach.WriteFile(e.StateFile, data); err != nil {
		return fmt.Errorf("save node devices' state: %w", err)
	}
	e.saved = maps.Clone(e.own)
	return nil
}
