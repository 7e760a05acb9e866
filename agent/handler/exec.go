package handler

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/axsched/ax/pkg/payload"
	"github.com/axsched/ax/pkg/retry"
)

// DefaultPath is the PATH given to exec'd commands.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// ExecConfig configures the exec handler.
type ExecConfig struct {
	// Allow lists the commands that may run: absolute paths or globs
	// (filepath.Match syntax, e.g. "/opt/ax/bin/*").
	Allow []string
	// EnvAllow lists the environment variables a payload may set (exact
	// names; none by default). Each must pass CheckEnvAllowName.
	EnvAllow []string
	// PermanentExitCodes are exit codes that are not worth retrying.
	PermanentExitCodes []int
	// Tail bounds the stdout and stderr kept, each (default DefaultTail).
	Tail int
	// WaitDelay bounds how long to wait for output pipes after the process
	// exits or is killed (default 2s).
	WaitDelay time.Duration
}

// ExecPayload is the payload of an exec job (payload.Exec).
type ExecPayload = payload.Exec

// Exec runs allowed commands.
type Exec struct {
	cfg      ExecConfig
	envAllow map[string]bool
	bufs     copyBufs // what stdout and stderr are read through (tail.go)
}

// NewExec validates cfg and returns the exec handler.
func NewExec(cfg ExecConfig) (*Exec, error) {
	for i, p := range cfg.Allow {
		if !filepath.IsAbs(p) {
			return nil, fmt.Errorf("%w: exec.allow[%d]: %q must be an absolute path or glob", ErrConfig, i, p)
		}
		if _, err := filepath.Match(p, "/"); err != nil {
			return nil, fmt.Errorf("%w: exec.allow[%d]: %q: %v", ErrConfig, i, p, err)
		}
	}
	envAllow := make(map[string]bool, len(cfg.EnvAllow))
	for i, n := range cfg.EnvAllow {
		if err := CheckEnvAllowName(n); err != nil {
			return nil, fmt.Errorf("%w: exec.env_allow[%d]: %q %v", ErrConfig, i, n, err)
		}
		envAllow[n] = true
	}
	if cfg.Tail <= 0 {
		cfg.Tail = DefaultTail
	}
	if cfg.WaitDelay <= 0 {
		cfg.WaitDelay = 2 * time.Second
	}
	return &Exec{cfg: cfg, envAllow: envAllow}, nil
}

// Allowed reports whether command may run.
func (e *Exec) Allowed(command string) bool {
	if !filepath.IsAbs(command) || filepath.Clean(command) != command {
		return false
	}
	for _, p := range e.cfg.Allow {
		if p == command {
			return true
		}
		if ok, _ := filepath.Match(p, command); ok {
			return true
		}
	}
	return false
}

// DecodeExecPayload decodes and checks an exec payload
// (payload.DecodeExec, which the controller runs on the job too).
func DecodeExecPayload(b []byte) (ExecPayload, error) { return payload.DecodeExec(b) }

// checkEnv reports why env may not be given to a command, or nil: every
// name must be in exec.env_allow, and no value may hold a NUL or start
// with "()" like an exported bash function (which bash before the 2014
// Shellshock fixes runs from any variable).
func (e *Exec) checkEnv(env map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(env)) {
		if !e.envAllow[k] {
			return fmt.Errorf("payload.env: %s is not in exec.env_allow of this agent", k)
		}
		v := env[k]
		if strings.IndexByte(v, 0) >= 0 {
			return fmt.Errorf("payload.env: %s: value must not contain NUL", k)
		}
		if strings.HasPrefix(strings.TrimLeft(v, " \t\n"), "()") {
			return fmt.Errorf("payload.env: %s: value must not start with () (a bash function definition)", k)
		}
	}
	return nil
}

// Run runs one attempt (a Func). Exit 0 is a success; a command outside
// exec.allow or an env name outside exec.env_allow fails for good without
// starting anything.
func (e *Exec) Run(ctx context.Context, t Task) Result {
	res, _ := e.run(ctx, t)
	return res
}

// run is Run; started reports whether a process was started.
func (e *Exec) run(ctx context.Context, req Task) (res Result, started bool) {
	p, err := DecodeExecPayload(req.Payload)
	if err != nil {
		return refused("%s", err), false
	}
	if !e.Allowed(p.Command) {
		return refused("command %q is not in exec.allow of this agent", p.Command), false
	}
	if err := e.checkEnv(p.Env); err != nil {
		return refused("%s", err), false
	}
	cmd := exec.Command(p.Command, p.Args...)
	cmd.Dir = p.Dir
	cmd.Env = []string{"PATH=" + DefaultPath}
	for k, v := range p.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Env = append(cmd.Env,
		"AX_JOB_ID="+req.JobID,
		"AX_EXEC_ID="+req.ExecID,
		"AX_ATTEMPT="+strconv.Itoa(req.Attempt),
		"AX_EPOCH="+strconv.FormatUint(req.Epoch, 10),
		"AX_SCHEDULED_AT="+req.ScheduledAt.UTC().Format(time.RFC3339Nano))
	cmd.Stdin = strings.NewReader(p.Stdin)
	stdout, stderr := newTail(e.cfg.Tail, &e.bufs), newTail(e.cfg.Tail, &e.bufs)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = e.cfg.WaitDelay
	if err := cmd.Start(); err != nil {
		return Result{Outcome: retry.OutcomeFailure, Code: 127, Message: fmt.Sprintf("start %s: %v", p.Command, err)}, false
	}
	pgid := cmd.Process.Pid
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	var werr error
	select {
	case werr = <-waited:
	case <-ctx.Done():
		// Kill the whole group: children that ignore SIGTERM go too.
		_ = unix.Kill(-pgid, unix.SIGKILL)
		werr = <-waited
	}
	code := 0
	var ee *exec.ExitError
	switch {
	case werr == nil:
	case errors.As(werr, &ee):
		code = ee.ExitCode() // -1 when killed by a signal
	default:
		code = -1
	}
	if ctx.Err() != nil {
		// Make sure nothing of the group survives.
		_ = unix.Kill(-pgid, unix.SIGKILL)
	}
	res = withRecord(retry.ExitOutcome(code), retry.ClassifyExit(code, e.cfg.PermanentExitCodes))
	var msg strings.Builder
	if res.Message != "" {
		msg.WriteString(res.Message)
	} else {
		msg.WriteString("exit status 0")
	}
	if s := stdout.String(); s != "" {
		msg.WriteString("\nstdout: ")
		msg.WriteString(s)
	}
	if s := stderr.String(); s != "" {
		msg.WriteString("\nstderr: ")
		msg.WriteString(s)
	}
	res.Message = msg.String()
	return res, true
}
