package fake

// Stats is a fixed ports.SystemStats.
type Stats struct {
	CPUs     int
	TotalRAM uint64
	FreeRAM  uint64
	FreeDisk uint64
	DiskErr  error
}

func (s *Stats) CPUCount() int         { return s.CPUs }
func (s *Stats) TotalRAMBytes() uint64 { return s.TotalRAM }
func (s *Stats) FreeRAMBytes() uint64  { return s.FreeRAM }
func (s *Stats) FreeDiskBytes(string) (uint64, error) {
	return s.FreeDisk, s.DiskErr
}
