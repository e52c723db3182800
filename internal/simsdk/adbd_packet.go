package simsdk

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// The adb transport between a host (the adb server) and a device (adbd)
// is a sequence of packets: a 24-byte little-endian header (command, two
// arguments, payload length, payload checksum, and the command's bitwise
// complement as a magic check) followed by the payload. This file is the
// framing only; adbd.go is the state machine on top of it.

const (
	adbCmdSYNC = 0x434e5953
	adbCmdCNXN = 0x4e584e43
	adbCmdOPEN = 0x4e45504f
	adbCmdOKAY = 0x59414b4f
	adbCmdCLSE = 0x45534c43
	adbCmdWRTE = 0x45545257
	adbCmdAUTH = 0x48545541
	adbCmdSTLS = 0x534c5453

	// adbVersion is the transport version adbd answers with: the one
	// after which payload checksums are no longer checked.
	adbVersion = 0x01000001
	// adbdMaxData is the largest payload this adbd accepts and sends
	// (adb's MAX_PAYLOAD_V2); the host's CNXN may lower it.
	adbdMaxData = 256 * 1024
	// adbHeaderLen is the fixed header size.
	adbHeaderLen = 24
)

// adbPacket is one transport packet.
type adbPacket struct {
	cmd, arg0, arg1 uint32
	data            []byte
}

func adbCmdName(cmd uint32) string {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], cmd)
	for _, c := range b {
		if c < 'A' || c > 'Z' {
			return fmt.Sprintf("0x%08x", cmd)
		}
	}
	return string(b[:])
}

func (p adbPacket) String() string {
	return fmt.Sprintf("%s(%d, %d, %d bytes)", adbCmdName(p.cmd), p.arg0, p.arg1, len(p.data))
}

// adbChecksum is the sum of the payload's bytes, which transports before
// version 0x01000001 verify.
func adbChecksum(b []byte) uint32 {
	var sum uint32
	for _, c := range b {
		sum += uint32(c)
	}
	return sum
}

var errADBPacket = errors.New("adb: malformed packet")

// readADBPacket reads one packet whose payload may be at most maxData
// bytes. The checksum is not verified: hosts of this protocol version do
// not require it, and the emulator's own adbd does not either.
func readADBPacket(r io.Reader, maxData uint32) (adbPacket, error) {
	var h [adbHeaderLen]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return adbPacket{}, err
	}
	p := adbPacket{
		cmd:  binary.LittleEndian.Uint32(h[0:]),
		arg0: binary.LittleEndian.Uint32(h[4:]),
		arg1: binary.LittleEndian.Uint32(h[8:]),
	}
	n := binary.LittleEndian.Uint32(h[12:])
	magic := binary.LittleEndian.Uint32(h[20:])
	if magic != p.cmd^0xffffffff {
		return adbPacket{}, fmt.Errorf("%w: magic 0x%08x does not match command 0x%08x", errADBPacket, magic, p.cmd)
	}
	if n > maxData {
		return adbPacket{}, fmt.Errorf("%w: %s payload of %d bytes exceeds %d", errADBPacket, adbCmdName(p.cmd), n, maxData)
	}
	if n > 0 {
		p.data = make([]byte, n)
		if _, err := io.ReadFull(r, p.data); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return adbPacket{}, err
		}
	}
	return p, nil
}

// encode lays the packet out as it goes on the wire, checksum included
// (an old host that still checks it is served too).
func (p adbPacket) encode() []byte {
	b := make([]byte, adbHeaderLen+len(p.data))
	binary.LittleEndian.PutUint32(b[0:], p.cmd)
	binary.LittleEndian.PutUint32(b[4:], p.arg0)
	binary.LittleEndian.PutUint32(b[8:], p.arg1)
	binary.LittleEndian.PutUint32(b[12:], uint32(len(p.data)))
	binary.LittleEndian.PutUint32(b[16:], adbChecksum(p.data))
	binary.LittleEndian.PutUint32(b[20:], p.cmd^0xffffffff)
	copy(b[adbHeaderLen:], p.data)
	return b
}
