package lease

import "errors"

// Sentinel errors of the package. Match them with errors.Is.
var (
	// ErrJobNotFound: the job does not exist in ax_jobs. A
	// GroupLeaseHost's ReadJob returns an error matching it when there is
	// no such job.
	ErrJobNotFound = errors.New("job not found")
	// ErrConflict: a compare-and-set write lost to other writers too many
	// times in a row (RecordGrant).
	ErrConflict = errors.New("conflict")
)

// errShardLost: the shard lease names another holder, or is gone (a
// renewal found it so). Matched with errors.Is.
var errShardLost = errors.New("shard lease held by another replica or gone")

// errLeaseRaced: a group lease changed while it was being renewed; the
// claim is answered neither renewed nor lost. Matched with errors.Is.
var errLeaseRaced = errors.New("lease changed during its renewal")
