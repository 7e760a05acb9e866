package ingest

import (
	"errors"
	"fmt"
)

// Sentinel errors of the package. Match them with errors.Is.
var (
	// ErrJobNotFound: the job does not exist in ax_jobs. A Host's ReadJob
	// returns an error matching it when there is no such job.
	ErrJobNotFound = errors.New("job not found")
	// ErrShardCount: the report consumers were made for another shard
	// count than the configured one (EnsureConsumers); the count is fixed
	// once they exist.
	ErrShardCount = errors.New("report consumers made for another shard count")
)

// shardCountError is ErrShardCount with the counts: its message names the
// count the consumers were made for and the configured one.
type shardCountError struct {
	made   string
	config int
}

func (e *shardCountError) Error() string {
	return fmt.Sprintf("the report consumers were made for %s shards, config says %d (the shard count is fixed once streams exist)", e.made, e.config)
}

// Is makes errors.Is(err, ErrShardCount) true.
func (e *shardCountError) Is(target error) bool { return target == ErrShardCount }
