package ios

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"

	"github.com/simlock/simlock/internal/ports"
)

// The driver keeps three small JSON records in its root (the devices it
// created in the default set, the golden devices, the resource overrides it
// wrote). They share one way to be read and written.

// readRecordFile decodes path into v; a missing file leaves v as it is
// (the empty record).
func readRecordFile(fsys ports.Filesystem, path string, v any) error {
	b, err := fsys.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("ios: read %s: %w", path, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("ios: %s is not a valid record: %w", path, err)
	}
	return nil
}

// writeRecordFile replaces path with v, atomically.
func writeRecordFile(fsys ports.Filesystem, path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return fsys.WriteFileAtomic(path, append(b, '\n'))
}
