package core

import "maps"

// SetForeignClaims replaces the engine's view of which of its devices
// another owner on the host holds (device id -> a description of the
// holder, for logs and status). Those devices leave the general pool: the
// planner grants, boots, evicts and sweeps none of them. The daemon
// derives the map from the host registry whenever that changes, so the
// engine reads only this in-memory copy under its lock and never the
// registry itself.
func (e *Engine) SetForeignClaims(held map[string]string) {
	e.section(func() {
		if maps.Equal(e.foreign, held) {
			return
		}
		e.foreign = maps.Clone(held)
		e.scheduleLocked()
	})
	e.notifyPositions()
}

// ForeignHolder reports who else on the host holds device id, if anyone,
// as of the last SetForeignClaims.
func (e *Engine) ForeignHolder(id string) (string, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	h, ok := e.foreign[id]
	return h, ok
}
