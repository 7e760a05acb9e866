package harness

// Task is the payload every contender holds: 80 bytes, no pointers, like
// an execution reference (ids, attempt, due time).
type Task struct {
	ID      uint64
	Due     int64 // nanoseconds after the child's base time
	Job     [16]byte
	Exec    [16]byte
	Attempt uint32
	Flags   uint32
	Extra   [24]byte
}

// TaskSize is the size of Task, subtracted from per-task memory.
const TaskSize = 80
