package fleet

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// A page keeps the limit smallest ids offered, whatever their order.
func TestPageIDsKeepsTheSmallest(t *testing.T) {
	for _, n := range []int{0, 1, 7, 100, 101, 1000} {
		for _, limit := range []int{1, 3, 100} {
			all := make([]string, n)
			for i := range all {
				all[i] = fmt.Sprintf("edge-%04d", i)
			}
			p := pageIDs{limit: limit}
			for _, i := range rand.Perm(n) {
				p.offer(all[i])
			}
			want := all[:min(n, limit)]
			if got := p.sorted(); !slices.Equal(got, want) || p.seen != n {
				t.Fatalf("n %d limit %d: got %v (seen %d), want %v", n, limit, got, p.seen, want)
			}
		}
	}
}
