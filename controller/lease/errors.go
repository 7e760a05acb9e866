package lease

import "errors"

// errShardLost: the shard lease names another holder, or is gone (a
// renewal found it so). Matched with errors.Is.
var errShardLost = errors.New("shard lease held by another replica or gone")
