package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/axsched/ax/controller/api"
	"github.com/axsched/ax/pkg/payload"
	"github.com/axsched/ax/pkg/protocol"
)

// maxJobFileSize bounds a job file.
const maxJobFileSize = 16 << 20

// FileJob is one job read from a job file.
type FileJob struct {
	// Source is "<file>" or "<file>: jobs[i]", for messages.
	Source string
	// Job is the decoded, validated job.
	Job protocol.Job
	// HasPaused says whether the file sets paused; if not, apply keeps the
	// current paused state of an existing job.
	HasPaused bool
}

// LoadJobFile reads a YAML (or JSON) file of one job, a list `jobs: [...]`,
// or several YAML documents of either form. Every job goes through
// protocol.DecodeJob, the API's decoder, so a file error names the field
// as the API would ("jobs[1].schedule.cron: ...").
func LoadJobFile(path string) ([]FileJob, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: -f: %v", ErrConfig, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxJobFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > maxJobFileSize {
		return nil, fmt.Errorf("%s: is over %d bytes", path, maxJobFileSize)
	}
	return ParseJobs(path, data)
}

// expandJobPaths replaces each directory in paths by its *.yaml, *.yml and
// *.json files, sorted; files stay as given.
func expandJobPaths(paths []string) ([]string, error) {
	var out []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("%w: -f: %v", ErrConfig, err)
		}
		if !st.IsDir() {
			out = append(out, p)
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			return nil, fmt.Errorf("%w: -f: %v", ErrConfig, err)
		}
		n := len(out)
		for _, e := range entries {
			ext := strings.ToLower(filepath.Ext(e.Name()))
			if !e.IsDir() && (ext == ".yaml" || ext == ".yml" || ext == ".json") {
				out = append(out, filepath.Join(p, e.Name()))
			}
		}
		if len(out) == n {
			return nil, fmt.Errorf("%w: -f: directory %s holds no .yaml, .yml or .json file", ErrConfig, p)
		}
	}
	return out, nil
}

// ParseJobs parses job file content; name is used in messages.
func ParseJobs(name string, data []byte) ([]FileJob, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var out []FileJob
	for doc := 0; ; doc++ {
		var v any
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: not valid YAML: %w", name, err)
		}
		if v == nil {
			continue
		}
		docName := name
		if doc > 0 {
			docName = fmt.Sprintf("%s (document %d)", name, doc+1)
		}
		jobs, err := parseDoc(docName, v)
		if err != nil {
			return nil, err
		}
		out = append(out, jobs...)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no jobs found (write one job, or a list under jobs:)", name)
	}
	return out, nil
}

func parseDoc(name string, v any) ([]FileJob, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: must be a job (a mapping) or jobs: [list of jobs]", name)
	}
	list, isList := m["jobs"]
	if !isList {
		j, err := decodeFileJob("", m)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		j.Source = name
		return []FileJob{j}, nil
	}
	if len(m) != 1 {
		for k := range m {
			if k != "jobs" {
				return nil, fmt.Errorf("%s: %w", name, &protocol.FieldError{Field: k, Reason: "unknown key next to jobs (a list file holds only jobs:)", Err: protocol.ErrInvalid})
			}
		}
	}
	items, ok := list.([]any)
	if !ok {
		return nil, fmt.Errorf("%s: %w", name, &protocol.FieldError{Field: "jobs", Reason: "must be a list of jobs", Err: protocol.ErrInvalid})
	}
	out := make([]FileJob, 0, len(items))
	for i, item := range items {
		prefix := "jobs[" + strconv.Itoa(i) + "]"
		jm, ok := item.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s: %w", name, &protocol.FieldError{Field: prefix, Reason: "must be a job (a mapping)", Err: protocol.ErrInvalid})
		}
		j, err := decodeFileJob(prefix, jm)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		j.Source = name + ": " + prefix
		out = append(out, j)
	}
	return out, nil
}

// decodeFileJob converts one YAML mapping to JSON and decodes it with
// protocol.DecodeJob. Field errors get prefix ("jobs[2]") in their path.
func decodeFileJob(prefix string, m map[string]any) (FileJob, error) {
	clean, err := jsonable(prefix, m)
	if err != nil {
		return FileJob{}, err
	}
	data, err := json.Marshal(clean)
	if err != nil {
		return FileJob{}, prefixField(prefix, &protocol.FieldError{Reason: "cannot convert to JSON: " + err.Error(), Err: protocol.ErrInvalid})
	}
	j, err := protocol.DecodeJob(data)
	if err != nil {
		return FileJob{}, prefixField(prefix, err)
	}
	// The payload of exec and http as the controller checks it, so that
	// the file's error names its field here, before anything is sent.
	if err := payload.Validate(j.Handler, j.Payload); err != nil {
		return FileJob{}, prefixField(prefix, err)
	}
	_, hasPaused := m["paused"]
	return FileJob{Job: j, HasPaused: hasPaused}, nil
}

// jsonable converts YAML values to values encoding/json accepts: mappings
// need string keys.
func jsonable(path string, v any) (any, error) {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			c, err := jsonable(join(path, k), e)
			if err != nil {
				return nil, err
			}
			out[k] = c
		}
		return out, nil
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			ks, ok := k.(string)
			if !ok {
				return nil, &protocol.FieldError{Field: path, Reason: fmt.Sprintf("key %v is not a string", k), Err: protocol.ErrInvalid}
			}
			c, err := jsonable(join(path, ks), e)
			if err != nil {
				return nil, err
			}
			out[ks] = c
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			c, err := jsonable(path+"["+strconv.Itoa(i)+"]", e)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	}
	return v, nil
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

// prefixField puts prefix in front of a *protocol.FieldError's field.
func prefixField(prefix string, err error) error {
	fe, ok := api.AsFieldError(err)
	if !ok {
		return err
	}
	if prefix == "" {
		return fe
	}
	f := prefix
	if fe.Field != "" {
		f = prefix + "." + fe.Field
	}
	return &protocol.FieldError{Field: f, Reason: fe.Reason, Err: fe.Err}
}

// checkDuplicates refuses two jobs that apply would match to the same job.
func checkDuplicates(jobs []FileJob) error {
	byKey := map[string]string{}
	byName := map[string]string{}
	for _, fj := range jobs {
		if k := fj.Job.IdempotencyKey; k != "" {
			if prev, dup := byKey[k]; dup {
				return fmt.Errorf("%s: idempotency_key: %q is also used by %s", fj.Source, k, prev)
			}
			byKey[k] = fj.Source
			continue
		}
		if prev, dup := byName[fj.Job.Name]; dup {
			return fmt.Errorf("%s: name: %q is also used by %s; apply matches jobs without idempotency_key by name", fj.Source, fj.Job.Name, prev)
		}
		byName[fj.Job.Name] = fj.Source
	}
	return nil
}
