package cli

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCompletion: `ax-controller completion bash|zsh|fish` (cobra's
// completion command, which the packages install) writes a script for each
// shell that the shell parses, and the scripts' completion requests
// (__complete) list the commands.
func TestCompletion(t *testing.T) {
	for _, tc := range []struct{ shell, marker string }{
		{"bash", "complete -o default -F __start_ax-controller ax-controller"},
		{"zsh", "#compdef ax-controller"},
		{"fish", "complete -c ax-controller"},
	} {
		t.Run(tc.shell, func(t *testing.T) {
			code, out, errOut := run(context.Background(), "completion", tc.shell)
			if code != ExitOK || !strings.Contains(out, tc.marker) {
				t.Fatalf("completion %s: exit %d, %q not in the script\nstderr: %s", tc.shell, code, tc.marker, errOut)
			}
			sh, err := exec.LookPath(tc.shell)
			if err != nil {
				t.Logf("%s not installed: script not parsed", tc.shell)
				return
			}
			path := filepath.Join(t.TempDir(), "ax-controller."+tc.shell)
			if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
				t.Fatal(err)
			}
			if b, err := exec.Command(sh, "-n", path).CombinedOutput(); err != nil {
				t.Errorf("%s -n: %v\n%s", tc.shell, err, b)
			}
		})
	}
	code, out, _ := run(context.Background(), "__complete", "")
	for _, cmd := range []string{"serve", "job", "exec", "agent", "version", "completion"} {
		if code != ExitOK || !strings.Contains(out, "\n"+cmd+"\t") && !strings.HasPrefix(out, cmd+"\t") {
			t.Errorf("__complete '' (exit %d) does not offer %q:\n%s", code, cmd, out)
		}
	}
}
