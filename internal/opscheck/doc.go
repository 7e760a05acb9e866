// Package opscheck checks the operations files of the repository against
// the code they describe: the Prometheus alert rules and the Grafana
// dashboard use only metrics a real controller exports, the demo configs
// and jobs load, the systemd units keep their hardening, and the
// cross-built agent stays within its size budget (DESIGN §9).
//
// The package holds small parsers for those files (see MetricNames,
// LoadAlertRules, DashboardExprs); the checks themselves are its tests.
package opscheck
