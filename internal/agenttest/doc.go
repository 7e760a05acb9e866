// Package agenttest runs real ax agents (agent.New + Run, SQLite store in
// a test's temporary directory) in the background of a test, with the
// short timings tests want, and stops them when the test ends. Test
// packages that need an agent beside a controller use it instead of each
// writing the same start/stop code.
package agenttest
