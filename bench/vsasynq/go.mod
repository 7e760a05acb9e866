module github.com/axsched/ax/bench/vsasynq

go 1.26.0

require (
	github.com/axsched/ax/bench v0.0.0
	github.com/hibiken/asynq v0.26.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/dgryski/go-rendezvous v0.0.0-20200823014737-9f7001d12a5f // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/redis/go-redis/v9 v9.14.1 // indirect
	github.com/robfig/cron/v3 v3.0.1 // indirect
	github.com/spf13/cast v1.10.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
	golang.org/x/time v0.14.0 // indirect
	google.golang.org/protobuf v1.36.10 // indirect
)

// The commands share bench/internal/proc with the bench module.
replace github.com/axsched/ax/bench => ../
