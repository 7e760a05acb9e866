package retention

import "errors"

// Sentinel errors of the package. Match them with errors.Is.
var (
	// ErrJobNotFound: the job does not exist in ax_jobs. A Host's ReadJob
	// returns an error matching it when there is no such job.
	ErrJobNotFound = errors.New("job not found")
)
