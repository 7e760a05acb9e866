package placement

import "errors"

// Sentinel errors of the package. Match them with errors.Is.
var (
	// ErrNoMember: no registered agent is a member of the group of a job
	// of mode all, so a fire of it has no execution (Placements). Its
	// message is that of the controller's ErrConflict, which the
	// controller makes it match.
	ErrNoMember = errors.New("conflict")
)
