module github.com/axsched/ax/bench

go 1.26.0

require (
	github.com/axsched/ax v0.0.0
	github.com/nats-io/nats.go v1.55.0
	github.com/nats-io/nuid v1.0.1
)

require (
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/nats-io/nkeys v0.4.16 // indirect
	github.com/robfig/cron/v3 v3.0.1 // indirect
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
)

replace github.com/axsched/ax => ../
