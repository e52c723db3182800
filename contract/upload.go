package contract

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
