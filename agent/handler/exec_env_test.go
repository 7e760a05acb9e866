package handler

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/axsched/ax/pkg/retry"
)

func writeScript(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
}

func exists(path string) bool { _, err := os.Stat(path); return err == nil }

// envTrick is a payload env that makes an allowed script run code of the
// controller's choosing: it creates the marker file.
type envTrick struct {
	name, command string
	env           map[string]string
	stdin         string
	refusedName   string // the name the refusal must give
}

// envTricks builds the tricks for the allowed scripts in dir; marker(name)
// is the file each one's injected code creates.
func envTricks(t *testing.T, dir string, marker func(string) string) []envTrick {
	t.Helper()
	bash, perl := filepath.Join(dir, "job.sh"), filepath.Join(dir, "job.pl")
	evil := filepath.Join(dir, "evil")
	if err := os.MkdirAll(evil, 0o755); err != nil {
		t.Fatal(err)
	}
	writeScript(t, filepath.Join(evil, "date"), "#!/bin/sh\ntouch "+marker("path")+"\n")
	tricks := []envTrick{
		{name: "bash-env-stdin", command: bash, env: map[string]string{"BASH_ENV": "/dev/stdin"},
			stdin: "touch " + marker("bash-env-stdin") + "\n", refusedName: "BASH_ENV"},
		{name: "bash-func", command: bash, env: map[string]string{"BASH_FUNC_echo%%": "() { touch " + marker("bash-func") + "; }"},
			refusedName: "BASH_FUNC_echo%%"},
		{name: "perl5opt-perl5db", command: perl, env: map[string]string{"PERL5OPT": "-d", "PERL5DB": "BEGIN { system(q{touch " + marker("perl5opt-perl5db") + "}) }"},
			refusedName: "PERL5DB"},
		{name: "path", command: bash, env: map[string]string{"PATH": evil + ":" + DefaultPath}, refusedName: "PATH"},
	}
	if cc, err := exec.LookPath("cc"); err == nil {
		src, so := filepath.Join(dir, "preload.c"), filepath.Join(dir, "preload.so")
		writeScript(t, src, `#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>
__attribute__((constructor)) static void f(void) {
	unsetenv("LD_PRELOAD");
	int fd = open(`+strconv.Quote(marker("ld-preload"))+`, O_CREAT | O_WRONLY, 0644);
	if (fd >= 0) close(fd);
}
`)
		if out, err := exec.Command(cc, "-shared", "-fPIC", "-o", so, src).CombinedOutput(); err != nil {
			t.Fatalf("cc: %v\n%s", err, out)
		}
		tricks = append(tricks, envTrick{name: "ld-preload", command: bash, env: map[string]string{"LD_PRELOAD": so}, refusedName: "LD_PRELOAD"})
	} else {
		t.Log("no C compiler: LD_PRELOAD is only checked at config load")
	}
	return tricks
}

// TestExecEnvTricksDoNotRun: each env trick runs injected code when given
// to the allowed script directly (the control), and is refused by the exec
// handler — FAILED, not retryable, the name in the message, nothing started.
func TestExecEnvTricksDoNotRun(t *testing.T) {
	dir := t.TempDir()
	writeScript(t, filepath.Join(dir, "job.sh"), "#!/bin/bash\necho hello \"$MODE\"\ndate >/dev/null\n")
	writeScript(t, filepath.Join(dir, "job.pl"), "#!/usr/bin/perl\nprint \"hello\\n\";\n")
	marker := func(name string) string { return filepath.Join(dir, name+".ran") }
	e, err := NewExec(ExecConfig{Allow: []string{dir + "/job.*"}, EnvAllow: []string{"MODE"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range envTricks(t, dir, marker) {
		t.Run(tc.name, func(t *testing.T) {
			if strings.HasSuffix(tc.command, ".pl") {
				if _, err := exec.LookPath("perl"); err != nil {
					t.Skip("no perl")
				}
			}
			// Control: the trick works on this machine.
			cmd := exec.Command(tc.command)
			cmd.Env = []string{"PATH=" + DefaultPath}
			for k, v := range tc.env {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
			cmd.Stdin = strings.NewReader(tc.stdin)
			out, _ := cmd.CombinedOutput()
			if !exists(marker(tc.name)) {
				t.Fatalf("control: the trick did not run its code here (%s)", out)
			}
			if err := os.Remove(marker(tc.name)); err != nil {
				t.Fatal(err)
			}

			p, _ := json.Marshal(ExecPayload{Command: tc.command, Env: tc.env, Stdin: tc.stdin})
			res, started := e.run(context.Background(), Task{JobID: "j", ExecID: "e", Attempt: 1, Payload: p})
			if started || res.Outcome != retry.OutcomeFailure || res.Retryable || res.Code != -1 {
				t.Errorf("started %v, result %+v: want a failure, not retryable, nothing started", started, res)
			}
			if want := tc.refusedName + " is not in exec.env_allow"; !strings.Contains(res.Message, want) {
				t.Errorf("message %q, want it to say %q", res.Message, want)
			}
			if exists(marker(tc.name)) {
				t.Fatal("the injected code ran")
			}
		})
	}
	t.Run("allowed name", func(t *testing.T) {
		p, _ := json.Marshal(ExecPayload{Command: filepath.Join(dir, "job.sh"), Env: map[string]string{"MODE": "fast"}})
		res, started := e.run(context.Background(), Task{JobID: "j", ExecID: "e", Attempt: 1, Payload: p})
		if !started || res.Outcome != retry.OutcomeSuccess || !strings.Contains(res.Message, "hello fast") {
			t.Fatalf("started %v, result %+v: want success saying hello fast", started, res)
		}
	})
	for name, value := range map[string]string{"MODE": "() { :; }; touch x", "MODE ": "x"} {
		p, _ := json.Marshal(ExecPayload{Command: filepath.Join(dir, "job.sh"), Env: map[string]string{name: value}})
		res, started := e.run(context.Background(), Task{JobID: "j", ExecID: "e", Attempt: 1, Payload: p})
		if started || res.Outcome != retry.OutcomeFailure || res.Retryable || !strings.Contains(res.Message, "payload.env: "+name) {
			t.Errorf("env %q=%q: started %v, result %+v: want refused naming it", name, value, started, res)
		}
	}
}

// TestExecEnvAllowConfig: exec.env_allow refuses, at load, names that are
// not plain variable names or that load or run code, naming the key and
// the entry.
func TestExecEnvAllowConfig(t *testing.T) {
	for _, name := range []string{
		"LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "ld_preload", "DYLD_INSERT_LIBRARIES",
		"BASH_ENV", "ENV", "BASH_FUNC_echo%%", "BASH_FUNC_echo", "BASH_XTRACEFD", "SHELLOPTS", "BASHOPTS", "PS4",
		"PATH", "Path", "IFS", "CDPATH", "GLOBIGNORE", "PROMPT_COMMAND",
		"PERL5OPT", "PERL5DB", "PERL5LIB", "PERLLIB", "PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME",
		"RUBYOPT", "NODE_OPTIONS", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "GIT_SSH_COMMAND", "GCONV_PATH",
		"GLIBC_TUNABLES", "OPENSSL_CONF", "LESSOPEN", "PAGER", "EDITOR", "AX_JOB_ID",
		"", "1MODE", "MO DE", "MODE=x", "MODE\x00",
	} {
		_, err := NewExec(ExecConfig{EnvAllow: []string{"MODE", name}})
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "exec.env_allow[1]: "+strconv.Quote(name)) {
			t.Errorf("env_allow %q: error %v, want ErrConfig naming exec.env_allow[1] and the name", name, err)
		}
	}
	for _, name := range []string{"MODE", "APP_LEVEL", "_x", "TZ", "LANG", "HOME"} {
		if err := CheckEnvAllowName(name); err != nil {
			t.Errorf("CheckEnvAllowName(%q) = %v, want nil", name, err)
		}
	}
}
