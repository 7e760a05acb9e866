// Package protocoltest builds valid protocol values for tests: jobs and
// the commands that carry them. It imports only pkg/*, so the tests of
// any package (the agent's, its scheduler's, the controller's) can use it.
package protocoltest
