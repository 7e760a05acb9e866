// Command ax-agent is the ax edge agent: `ax-agent run --config
// configs/ax-agent.yaml`. Configuration comes from the YAML file, AX_*
// environment variables (AX_CLOCK_MAX_SKEW for clock.max_skew) and flags,
// in increasing order of precedence.
package main
