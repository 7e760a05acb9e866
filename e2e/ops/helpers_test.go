package ops

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/axsched/ax/pkg/protocol"
)

// repoRoot is the repository root (two levels above this package).
func repoRoot(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("runtime.Caller failed")
	}
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// repoPath joins elems to the repository root.
func repoPath(t testing.TB, elems ...string) string {
	t.Helper()
	return filepath.Join(append([]string{repoRoot(t)}, elems...)...)
}

// demoDirToken is the placeholder scripts/demo.sh replaces with the
// directory holding the demo's device scripts.
const demoDirToken = "@DEMO_DIR@"

// renderDemo reads a demo file and replaces the placeholder as
// scripts/demo.sh does.
func renderDemo(t testing.TB, path, dir string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return []byte(strings.ReplaceAll(string(b), demoDirToken, dir))
}

// demoJobs decodes every configs/demo/jobs/*.yaml file (one job each) with
// the API's decoder, protocol.DecodeJob, after rendering it for dir.
func demoJobs(t testing.TB, dir string) map[string]protocol.Job {
	t.Helper()
	files, err := filepath.Glob(repoPath(t, "configs", "demo", "jobs", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no demo jobs in configs/demo/jobs")
	}
	out := map[string]protocol.Job{}
	for _, f := range files {
		var m map[string]any
		if err := yaml.Unmarshal(renderDemo(t, f, dir), &m); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		data, err := json.Marshal(m)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		j, err := protocol.DecodeJob(data)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[filepath.Base(f)] = j
	}
	return out
}
