package ops

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// unitFile is a parsed systemd unit: section → key → values (in order).
type unitFile map[string]map[string][]string

func parseUnit(t *testing.T, path string) unitFile {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	u := unitFile{}
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = strings.Trim(line, "[]")
			u[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("%s:%d: not a key=value line in a section: %q", path, n, line)
			}
			u[section][k] = append(u[section][k], v)
		}
	}
	return u
}

func (u unitFile) get(section, key string) string {
	v := u[section][key]
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}

// TestSystemdUnits: both units run as the system user ax, restart forever,
// keep their data in a StateDirectory under /var/lib/ax passed as
// --data-dir, stay stopped while the config is the packaged default, and
// keep the sandbox options; the agent's unit leaves off the options that
// would stop allowlisted device commands from working.
func TestSystemdUnits(t *testing.T) {
	common := map[string]string{
		"Restart": "always", "NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes",
		"PrivateTmp": "yes", "User": "ax", "Group": "ax", "StateDirectoryMode": "0700", "ProtectKernelTunables": "yes", "ProtectKernelModules": "yes",
		"ProtectControlGroups": "yes", "RestrictSUIDSGID": "yes", "LockPersonality": "yes", "CapabilityBoundingSet": "",
	}
	for _, tc := range []struct {
		unit, binary, state string
		extra               map[string]string
		absent              []string
	}{
		{"ax-agent.service", "/usr/bin/ax-agent", "ax/ax-agent", nil,
			[]string{"PrivateDevices", "ProtectClock", "DevicePolicy", "DeviceAllow", "RestrictAddressFamilies", "MemoryDenyWriteExecute"}},
		{"ax-controller.service", "/usr/bin/ax-controller", "ax/ax-controller",
			map[string]string{"PrivateDevices": "yes", "ProtectClock": "yes", "MemoryDenyWriteExecute": "yes"}, nil},
	} {
		t.Run(tc.unit, func(t *testing.T) {
			u := parseUnit(t, repoPath(t, "configs", "systemd", tc.unit))
			for k, want := range common {
				if _, ok := u["Service"][k]; !ok {
					t.Errorf("[Service] %s is missing (want %q)", k, want)
				} else if got := u.get("Service", k); got != want {
					t.Errorf("[Service] %s=%q, want %q", k, got, want)
				}
			}
			for k, want := range tc.extra {
				if got := u.get("Service", k); got != want {
					t.Errorf("[Service] %s=%q, want %q", k, got, want)
				}
			}
			for _, k := range tc.absent {
				if _, ok := u["Service"][k]; ok {
					t.Errorf("[Service] %s is set; it stops allowlisted device commands (see the unit's comment)", k)
				}
			}
			if got := u.get("Service", "StateDirectory"); got != tc.state {
				t.Errorf("StateDirectory=%q, want %q", got, tc.state)
			}
			name := strings.TrimSuffix(tc.unit, ".service")
			if _, ok := u["Service"]["DynamicUser"]; ok {
				t.Error("[Service] DynamicUser is set; the packages create the system user ax and own /var/lib/ax/" + name)
			}
			cond := u.get("Service", "ExecCondition")
			if !strings.Contains(cond, "cmp -s /etc/ax/"+name+".yaml /usr/share/ax/"+name+".yaml") {
				t.Errorf("ExecCondition=%q: want a cmp of /etc/ax/%s.yaml with the packaged default", cond, name)
			}
			exe := u.get("Service", "ExecStart")
			if !strings.HasPrefix(exe, tc.binary+" ") || !strings.Contains(exe, " --config /etc/ax/"+name+".yaml") ||
				!strings.Contains(exe, " --data-dir %S/"+tc.state) {
				t.Errorf("ExecStart=%q: want %s ... --config /etc/ax/%s.yaml ... --data-dir %%S/%s", exe, tc.binary, name, tc.state)
			}
			if !strings.Contains(u.get("Service", "ReadWritePaths"), "%S/"+tc.state) {
				t.Errorf("ReadWritePaths does not include %%S/%s", tc.state)
			}
			if u.get("Unit", "StartLimitIntervalSec") != "0" {
				t.Error("[Unit] StartLimitIntervalSec=0 is missing: systemd stops restarting after 5 failures in 10s")
			}
			if u.get("Install", "WantedBy") != "multi-user.target" {
				t.Error("[Install] WantedBy=multi-user.target is missing")
			}
		})
	}
}

// TestSystemdAnalyzeVerify runs systemd-analyze verify on both units, with
// ExecStart pointing at an executable that exists here. Skipped where
// systemd-analyze is not installed.
func TestSystemdAnalyzeVerify(t *testing.T) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var units []string
	for _, name := range []string{"ax-agent", "ax-controller"} {
		b, err := os.ReadFile(repoPath(t, "configs", "systemd", name+".service"))
		if err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, name+".service")
		if err := os.WriteFile(out, bytes.ReplaceAll(b, []byte("/usr/bin/"+name), []byte(self)), 0o644); err != nil {
			t.Fatal(err)
		}
		units = append(units, out)
	}
	out, err := exec.Command(sa, append([]string{"verify"}, units...)...).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}
