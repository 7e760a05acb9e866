package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/axsched/ax/controller/auth"
	"github.com/axsched/ax/pkg/protocol"
)

type watchOpts struct {
	job   string
	state string
	since time.Duration
	count int
}

func newExecWatchCmd(g *globals) *cobra.Command {
	var o watchOpts
	cmd := &cobra.Command{
		Use:   "watch",
		Short: "Follow state-change events live (AX_EVT over NATS), one row per event",
		Long: "watch reads the AX_EVT stream from NATS (nats.url: --nats-url, AX_NATS_URL or the --config " +
			"file; default " + DefaultNATSURL + ") and prints one row per event until interrupted. " +
			"An event stands for one change the controller stored: an agent's report of a run's triggered, running " +
			"and finished steps together is one event into the state reached, with the states passed through in VIA " +
			"(--state RUNNING shows it too). " +
			"The connection uses TLS with a tls:// URL or when any of nats.tls.ca_file, nats.tls.cert_file, " +
			"nats.tls.key_file is set (--nats-ca-file, --nats-cert, --nats-key, AX_NATS_TLS_* or the --config file). " +
			"In the config of a controller with the embedded server, nats.tls.cert_file is the server's own " +
			"certificate: give a client certificate with --nats-cert/--nats-key when it requires one (verify_clients).",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := g.outputFormat()
			if err != nil {
				return err
			}
			state, err := parseState("state", o.state)
			if err != nil {
				return err
			}
			if o.job != "" {
				if err := protocol.ValidateJobID("job", o.job); err != nil {
					return fmt.Errorf("%w: --%w", ErrUsage, err)
				}
			}
			if o.since < 0 || o.count < 0 {
				return fmt.Errorf("%w: --since and --count must not be negative", ErrUsage)
			}
			v, err := newViper(g.config, cmd.Flags(), map[string]string{
				"nats-url": "nats.url", "nats-creds": "nats.creds_file",
				"nats-ca-file": "nats.tls.ca_file", "nats-cert": "nats.tls.cert_file", "nats-key": "nats.tls.key_file",
			})
			if err != nil {
				return err
			}
			url := v.GetString("nats.url")
			if url == "" {
				url = "nats://" + net.JoinHostPort(v.GetString("nats.host"), strconv.Itoa(v.GetInt("nats.port")))
			}
			tlsOpts, err := natsTLSOptions(url, natsTLSFiles{
				CAFile:   v.GetString("nats.tls.ca_file"),
				CertFile: v.GetString("nats.tls.cert_file"),
				KeyFile:  v.GetString("nats.tls.key_file"),
			})
			if err != nil {
				return err
			}
			return watch(cmd.Context(), g.io.Out, format, url, watchCreds(v), tlsOpts, state, o)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.job, "job", "", "only events of this job id")
	fl.StringVar(&o.state, "state", "", "only events into this state or through it (FAILED, RETRY_WAITING, RUNNING, ...)")
	fl.DurationVar(&o.since, "since", 0, "first replay the events of this long ago (e.g. 10m); 0: only new events")
	fl.IntVar(&o.count, "count", 0, "stop after this many events (0: run until interrupted)")
	fl.String("nats-url", "", "NATS URL (env AX_NATS_URL; default "+DefaultNATSURL+")")
	fl.String("nats-creds", "", "NATS credentials file (env AX_NATS_CREDS_FILE)")
	fl.String("nats-ca-file", "", "PEM CA of the NATS server's certificate; makes the connection TLS (env AX_NATS_TLS_CA_FILE)")
	fl.String("nats-cert", "", "PEM client certificate for NATS TLS, with --nats-key (env AX_NATS_TLS_CERT_FILE)")
	fl.String("nats-key", "", "PEM key of --nats-cert (env AX_NATS_TLS_KEY_FILE)")
	return cmd
}

// eventSubjects are the AX_EVT filters of a watch. An event of a change
// that passed through TRIGGERED or RUNNING on its way is on the subject of
// the state it reached (protocol.Event.Via): a watch of those two states
// reads every state's subjects and keeps the events that entered it
// (entered). AX_EVT stores an event on its state and a partition of its
// job (protocol.EventStoredSubject), and held it on its job before that
// (an earlier controller's), so a watch of one job reads both and keeps
// that job's events (wanted).
func eventSubjects(state protocol.State, job string) []string {
	s := protocol.State("*")
	if state != "" && !passedThrough(state) {
		s = state
	}
	if job == "" {
		return []string{"ax.evt." + string(s) + ".*"}
	}
	return []string{protocol.EventStoredSubject(s, job), protocol.EventSubject(s, job)}
}

// wanted reports whether a watch of state and job (empty: any) prints ev.
func wanted(ev protocol.Event, state protocol.State, job string) bool {
	return entered(ev, state) && (job == "" || ev.JobID == job)
}

// passedThrough reports whether one change can pass through state on its
// way to another (an agent's report of a run's triggered, running and
// finished steps together).
func passedThrough(state protocol.State) bool {
	return state == protocol.StateTriggered || state == protocol.StateRunning
}

// entered reports whether ev's change entered state (its To or one of its
// Via); every event enters the empty state.
func entered(ev protocol.Event, state protocol.State) bool {
	return state == "" || slices.Contains(ev.Path(), state)
}

func watch(ctx context.Context, out io.Writer, format, url, creds string, tlsOpts []nats.Option, state protocol.State, o watchOpts) error {
	opts := append([]nats.Option{nats.Name("ax-controller exec watch"), nats.MaxReconnects(-1)}, tlsOpts...)
	if creds != "" {
		opt, err := auth.CredsOption(creds)
		if err != nil {
			return fmt.Errorf("nats.creds_file: %w", err)
		}
		opts = append(opts, opt)
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return fmt.Errorf("nats.url: connect %s: %w", url, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	cfg := jetstream.OrderedConsumerConfig{
		FilterSubjects: eventSubjects(state, o.job),
		DeliverPolicy:  jetstream.DeliverNewPolicy,
	}
	if o.since > 0 {
		start := time.Now().Add(-o.since)
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &start
	}
	cons, err := js.OrderedConsumer(ctx, protocol.StreamEvents, cfg)
	if err != nil {
		return fmt.Errorf("watch stream %s: %w", protocol.StreamEvents, err)
	}
	it, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("watch stream %s: %w", protocol.StreamEvents, err)
	}
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	defer it.Stop()

	if format == "table" {
		fmt.Fprintf(out, watchRowFmt, "TIME", "STATE", "FROM", "VIA", "ATTEMPT", "AGENT", "EXEC_ID", "REASON")
	}
	for n := 0; o.count == 0 || n < o.count; {
		msg, err := it.Next()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return nil
			}
			return fmt.Errorf("watch: %w", err)
		}
		ev, err := protocol.DecodeEvent(msg.Data())
		if err != nil {
			// A bad event is reported and skipped; it never stops the watch.
			fmt.Fprintf(out, "# skipped a bad event on %s: %v\n", msg.Subject(), err)
			continue
		}
		if !wanted(ev, state, o.job) {
			continue
		}
		n++
		if err := printEvent(out, format, ev); err != nil {
			return err
		}
	}
	return nil
}

const watchRowFmt = "%-20s  %-13s  %-13s  %-17s  %-7s  %-16s  %-44s  %s\n"

// printEvent writes one event: a compact JSON line, a YAML document, or
// one table row (every cell on one line, see cellText).
func printEvent(out io.Writer, format string, ev protocol.Event) error {
	switch format {
	case "json":
		return printCompactJSON(out, ev)
	case "yaml":
		if _, err := fmt.Fprintln(out, "---"); err != nil {
			return err
		}
		return printValue(out, "yaml", ev)
	}
	from := string(ev.From)
	via := make([]string, len(ev.Via))
	for i, st := range ev.Via {
		via[i] = string(st)
	}
	reason := ev.Reason
	if ev.Result != nil && ev.Result.Message != "" {
		reason = strings.TrimSpace(reason + " " + ev.Result.Message)
	}
	_, err := fmt.Fprintf(out, watchRowFmt, timeText(ev.At), dash(cellText(string(ev.To))), dash(cellText(from)),
		dash(cellText(strings.Join(via, ","))), strconv.Itoa(ev.Attempt), dash(cellText(ev.Agent)), dash(cellText(ev.ExecID)), dash(cellText(reason)))
	return err
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
