package scheduler

import (
	"testing"
	"time"
)

func TestReadyQueueFIFOWithinPriority(t *testing.T) {
	q := readyQueue{agingStep: time.Hour}
	now := time.Unix(1000, 0)
	for i := range 5 {
		q.push(&item{id: int64(i), prio: 3, enqueued: now})
	}
	q.push(&item{id: 99, prio: 9, enqueued: now})
	want := []int64{99, 0, 1, 2, 3, 4}
	for _, w := range want {
		it, ok := q.pop(now)
		if !ok || it.id != w {
			t.Fatalf("pop = %v, want %d", it, w)
		}
	}
	if _, ok := q.pop(now); ok {
		t.Fatal("queue not empty")
	}
}

// TestAgingLowPriorityRunsUnderSaturation: one worker takes one item per
// 10 ms while priority-9 items arrive faster than that; the priority-0 item
// must still run. Its aged priority reaches 9 after 9 steps; as the backlog
// grows, the head of priority 9 ages too (at half the rate here), so the
// bound is 2·9 steps plus one pop.
func TestAgingLowPriorityRunsUnderSaturation(t *testing.T) {
	step := 100 * time.Millisecond
	q := readyQueue{agingStep: step}
	now := time.Unix(1000, 0)
	low := &item{id: -1, prio: 0, enqueued: now}
	q.push(low)
	id := int64(0)
	for tick := 0; tick < 10000; tick++ {
		// Two high-priority arrivals per pop: the queue only grows.
		for range 2 {
			id++
			q.push(&item{id: id, prio: 9, enqueued: now})
		}
		it, _ := q.pop(now)
		if it == low {
			waited := now.Sub(low.enqueued)
			if waited > 20*step {
				t.Fatalf("priority 0 waited %s, bound %s", waited, 20*step)
			}
			return
		}
		now = now.Add(10 * time.Millisecond)
	}
	t.Fatal("priority-0 item never ran under saturating priority-9 load")
}

func TestReadyQueueRemove(t *testing.T) {
	q := readyQueue{agingStep: time.Second}
	now := time.Unix(0, 0)
	for i := range 10 {
		q.push(&item{id: int64(i), prio: uint8(i % 3), enqueued: now})
	}
	if _, ok := q.remove(4); !ok {
		t.Fatal("remove 4 failed")
	}
	if _, ok := q.remove(4); ok {
		t.Fatal("removed twice")
	}
	seen := map[int64]bool{}
	for q.len() > 0 {
		it, _ := q.pop(now)
		seen[it.id] = true
	}
	if len(seen) != 9 || seen[4] {
		t.Fatalf("popped %v", seen)
	}
}
