// Package ops checks the operations files of the repository against
// the code they describe: the Prometheus alert rules and the Grafana
// dashboard use only metrics a real controller exports, the demo configs
// and jobs load, the systemd units keep their hardening, the cross-built
// agent stays within its size budget (docs/architecture.md: Budgets), and the .deb and .rpm
// packages of scripts/package.sh hold what they should, pass lintian and
// install and purge cleanly (dpkg --root, as root).
//
// The package holds small parsers for those files (see MetricNames,
// LoadAlertRules, DashboardExprs); the checks themselves are its tests.
package ops
