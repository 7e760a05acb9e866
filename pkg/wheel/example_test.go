package wheel_test

import (
	"fmt"
	"time"

	"github.com/axsched/ax/pkg/wheel"
)

// The deterministic core takes time as an argument, so it needs no sleeps.
func Example() {
	start := time.Now()
	w, err := wheel.New[string](wheel.DefaultConfig(), start)
	if err != nil {
		panic(err)
	}
	w.Add(start.Add(25*time.Millisecond), "a")
	h := w.Add(start.Add(2*time.Hour), "b") // beyond 1 h: overflow heap
	w.Add(start.Add(90*time.Second), "c")   // 1 s level, cascaded later
	fmt.Println(w.Cancel(h))                // "b" will never fire
	next, _ := w.NextWake()
	fmt.Println(next.Sub(start)) // end of a's 10 ms slot
	w.Advance(next, func(v string) { fmt.Println(v) })
	w.Advance(start.Add(2*time.Minute), func(v string) { fmt.Println(v) })
	fmt.Println(w.Len())
	// Output:
	// true
	// 30ms
	// a
	// c
	// 0
}
