// Package cli holds the cobra commands of ax-controller: serve (the
// controller with its HTTP API) and the operator commands job, exec and
// agent that talk to that API (and, for exec watch, to NATS).
//
// Configuration is read with viper from the --config YAML file, AX_*
// environment variables and flags, in that order of precedence; every
// error names the key. Main runs a command line in-process, which is how
// the tests drive it.
package cli
