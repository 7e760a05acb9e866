package controller

import (
	"errors"
	"fmt"

	"github.com/axsched/ax/controller/fleet"
	"github.com/axsched/ax/controller/placement"
)

// Sentinel errors of the controller. Match them with errors.Is.
var (
	// ErrNotFound: the job or execution does not exist.
	ErrNotFound = errors.New("not found")
	// ErrJobRetired: the one-shot job left the live job set after its
	// executions all ended (it is listed with JobFilter.Retired until
	// history.retention). It comes with ErrNotFound.
	ErrJobRetired = errors.New("job retired")
	// ErrExists: a job with the same idempotency key already exists. It is
	// returned as *ExistsError, which carries the existing job's id.
	ErrExists = errors.New("already exists")
	// ErrConflict: the request contradicts the current state (retry of an
	// execution that is not FAILED, cancel of a finished one, update of a
	// deleted job, a change of a field that cannot change).
	ErrConflict = errors.New("conflict")
	// ErrNotReady: the controller is not started (or already closed), or its
	// streams and buckets are not usable.
	ErrNotReady = errors.New("controller not ready")
	// ErrStoreFailed: the embedded NATS server can no longer write its
	// store (a full disk, an I/O error, a permission change): the
	// controller has failed and must be started again (Controller.Failed).
	ErrStoreFailed = errors.New("embedded NATS server cannot write its store")
	// ErrConfig marks an invalid Config; the message names the key.
	ErrConfig = errors.New("invalid controller config")
)

// ExistsError is returned by CreateJob when the idempotency key is taken:
// ID is the job that holds it. errors.Is(err, ErrExists) is true.
type ExistsError struct {
	// ID is the existing job's id.
	ID string
}

// Error says which job holds the key.
func (e *ExistsError) Error() string {
	return fmt.Sprintf("idempotency_key: already exists: job %s", e.ID)
}

// Is makes errors.Is(err, ErrExists) true.
func (e *ExistsError) Is(target error) bool { return target == ErrExists }

// mappedError is an error of a component package (fleet, placement) as
// the controller's API returns it: the package's message and chain
// unchanged, and errors.Is matching the controller's sentinel of each of
// the package's in as, which controller/api maps to HTTP statuses.
type mappedError struct {
	err error
	as  map[error]error // the controller's sentinel → the package's
}

func (e *mappedError) Error() string { return e.err.Error() }

func (e *mappedError) Unwrap() error { return e.err }

// Is makes errors.Is(err, target) true for a controller sentinel target
// whose package sentinel err matches.
func (e *mappedError) Is(target error) bool {
	pkg, ok := e.as[target]
	return ok && errors.Is(e.err, pkg)
}

// fleetErr returns err of the fleet matching ErrNotFound, ErrExists and
// ErrConflict for the fleet's own (nil stays nil).
func fleetErr(err error) error {
	if err == nil {
		return nil
	}
	return &mappedError{err: err, as: map[error]error{
		ErrNotFound: fleet.ErrNotFound, ErrExists: fleet.ErrExists, ErrConflict: fleet.ErrConflict}}
}

// placementErr returns err of the placement matching ErrConflict for
// placement.ErrNoMember, a group of mode all without a member (nil stays
// nil).
func placementErr(err error) error {
	if err == nil {
		return nil
	}
	return &mappedError{err: err, as: map[error]error{ErrConflict: placement.ErrNoMember}}
}

// errJobIDTaken: the job id CreateJob drew is held by another job (KV
// Create found the key); CreateJob draws another (jobs.go).
var errJobIDTaken = errors.New("job id taken")

// errHistoryBehind: the history index had not applied AX_EVT up to its
// end when a reload compared live records with it; events lost to a crash
// are restored by a later reload (an ended process's write mark is not
// recorded as checked).
var errHistoryBehind = errors.New("history index behind AX_EVT at shard acquisition; events lost to a crash are not restored this time")
