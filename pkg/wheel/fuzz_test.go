package wheel

import (
	"encoding/binary"
	"testing"
)

// FuzzWheel decodes bytes into a sequence of Add, Cancel and Advance
// operations on a small wheel and runs them through the model checker.
//
// Encoding: byte 0 picks a config from smallConfigs; then each operation is
// 3 bytes: an opcode and a little-endian uint16 argument.
func FuzzWheel(f *testing.F) {
	f.Add([]byte{0, 0, 5, 0, 0, 200, 0, 2, 50, 0, 3, 0, 0})
	f.Add([]byte{1, 0, 1, 0, 0, 2, 0, 0, 3, 0, 1, 0, 0, 2, 255, 3, 0, 0})
	f.Add([]byte{4, 0, 255, 255, 2, 0, 1, 3, 0, 0, 1, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		cfg := smallConfigs[int(data[0])%len(smallConfigs)]
		m := newModel(t, cfg)
		span := int64(cfg.Levels[len(cfg.Levels)-1].Span())
		tick := int64(cfg.Levels[0].Tick)
		data = data[1:]
		for len(data) >= 3 && len(m.handles) < 2000 {
			op, arg := data[0], int64(binary.LittleEndian.Uint16(data[1:3]))
			data = data[3:]
			switch op % 6 {
			case 0: // add ahead, scaled to reach the overflow
				m.add(m.now() + arg*span/4096)
			case 1: // add near, in finest ticks
				m.add(m.now() + arg%(4*tick))
			case 2: // add in the past
				m.add(m.now() - arg)
			case 3: // cancel, sometimes a stale or unknown handle
				m.cancel(int(arg)%(len(m.handles)+2) - 1)
			case 4: // advance
				m.advance(m.now() + arg*span/8192)
			case 5: // advance to the next wake-up
				if wake, ok := m.w.NextWake(); ok {
					m.advance(int64(wake.Sub(m.start)))
				}
			}
		}
		m.finish()
	})
}
