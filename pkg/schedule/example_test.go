package schedule_test

import (
	"fmt"
	"time"

	"github.com/axsched/ax/pkg/schedule"
)

func Example() {
	spec := schedule.Spec{Cron: "0 * * * *", Timezone: "Europe/Berlin"}
	if err := spec.Validate(); err != nil {
		fmt.Println(err)
		return
	}
	created := time.Date(2026, 5, 10, 10, 0, 30, 0, time.UTC)
	s, _ := schedule.Parse(spec, created)
	first, _ := s.Next(created)
	fmt.Println("first:", first.UTC().Format(time.RFC3339))

	lastFire := time.Date(2026, 5, 10, 11, 0, 0, 0, time.UTC)
	now := time.Date(2026, 5, 10, 15, 10, 0, 0, time.UTC)
	plan := schedule.Plan(s, schedule.Misfire{}, lastFire, now)
	fmt.Println("run:", plan.Run[0].UTC().Format(time.RFC3339), "missed:", plan.Missed,
		plan.FirstMissed.UTC().Format("15:04"), "to", plan.LastMissed.UTC().Format("15:04"))

	fmt.Println(schedule.Spec{Cron: "* * *"}.Validate())
	// Output:
	// first: 2026-05-10T11:00:00Z
	// run: 2026-05-10T15:00:00Z missed: 3 12:00 to 14:00
	// schedule.cron: expected 5 or 6 fields, got 3
}
