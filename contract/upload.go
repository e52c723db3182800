package contract

import (
	"fmt"
	"strings"
)

// DeviceUploadIn streams one file into the lease's scratch directory on the
// machine that holds the device. Over the socket a file travels as a
// sequence of calls with increasing Offset; the call with Final set
// commits it. Over HTTP it is one PUT of the raw body. The file is deleted
// when the lease ends. A later device.exec names it as {upload:NAME}.
type DeviceUploadIn struct {
	LeaseID string `json:"leaseId"`
	// Name is the file's base name inside the scratch directory.
	Name string `json:"name"`
	// Offset is where Data starts; a chunk must continue the file exactly.
	Offset int64 `json:"offset"`
	// Data is the chunk, base64 on the wire.
	Data []byte `json:"data,omitempty"`
	// Final commits the file after this chunk.
	Final bool `json:"final,omitempty"`
	// Abort drops the unfinished file of this name (a sender that gives
	// up); nothing of it is kept. A committed file is not touched.
	Abort bool `json:"abort,omitempty"`
	// SizeBytes, when set on the first chunk, is the whole file's size,
	// checked against the cap and the disk guard before anything is written.
	SizeBytes int64 `json:"sizeBytes,omitempty"`
}

type DeviceUploadOut struct {
	Name string `json:"name"`
	// Received is the bytes stored so far.
	Received int64 `json:"received"`
	// Complete is true once the file is committed.
	Complete bool `json:"complete"`
	// SHA256 of the committed file.
	SHA256 string `json:"sha256,omitempty"`
}

// UploadChunkBytes bounds one chunk's Data. Base64 makes a chunk about
// 1.4 MiB on the wire, well inside the socket's and the uplink's frame
// limits, and it is the most any hop holds of a file at once.
const UploadChunkBytes = 1 << 20

// MaxUploadNameBytes bounds an upload's name.
const MaxUploadNameBytes = 128

// ValidateUploadName refuses a name that is not a plain base name: it must
// start with a letter or digit and hold only letters, digits and ". _ - +",
// so it has no separator, cannot be "." or "..", and never collides with
// the daemon's own hidden partial files.
func ValidateUploadName(name string) error {
	bad := func(why string) error {
		return Errorf(CodeBadRequest, "upload name %q %s", name, why).WithDetails("field", "name").
			WithNext("name the file by a base name such as app.apk (letters, digits, '.', '_', '-', '+')")
	}
	if name == "" {
		return bad("is empty")
	}
	if len(name) > MaxUploadNameBytes {
		return bad(fmt.Sprintf("is longer than %d bytes", MaxUploadNameBytes))
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if i == 0 && !alnum {
			return bad("must start with a letter or a digit")
		}
		if !alnum && c != '.' && c != '_' && c != '-' && c != '+' {
			return bad(fmt.Sprintf("holds %q, which a base name may not", c))
		}
	}
	if strings.Contains(name, "..") {
		return bad(`holds ".."`)
	}
	return nil
}
