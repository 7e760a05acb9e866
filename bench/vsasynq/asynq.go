package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/hibiken/asynq"

	"github.com/axsched/ax/bench/internal/proc"
)

// asynqSystem is redis-server (AOF everysec) plus a worker process of this
// command (asynq.Server, 8 workers, and asynq.Scheduler for periodic
// jobs).
type asynqSystem struct {
	redis  *proc.Proc
	worker *proc.Proc
	addr   string
	client *asynq.Client
	insp   *asynq.Inspector
}

func (q *asynqSystem) name() string { return "asynq" }

func (q *asynqSystem) start(ctx context.Context, dir string, s *sink, periodic int) error {
	port, err := proc.FreePort()
	if err != nil {
		return err
	}
	q.addr = fmt.Sprintf("127.0.0.1:%d", port)
	if q.redis, err = proc.Start("redis-server", filepath.Join(dir, "redis.log"), nil, "--port", strconv.Itoa(port),
		"--bind", "127.0.0.1", "--dir", dir, "--appendonly", "yes", "--appendfsync", "everysec", "--save", ""); err != nil {
		return err
	}
	opt := asynq.RedisClientOpt{Addr: q.addr}
	q.client = asynq.NewClient(opt)
	q.insp = asynq.NewInspector(opt)
	if err := proc.Poll(ctx, 30*time.Second, 20*time.Millisecond, "redis up", func() (bool, error) {
		_, err := q.insp.Queues()
		return err == nil, nil
	}); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if q.worker, err = proc.Start(self, filepath.Join(dir, "worker.log"), nil, "asynq-worker", "-redis", q.addr,
		"-periodic", strconv.Itoa(periodic), "-url", s.url+"/hit"); err != nil {
		return err
	}
	return proc.Poll(ctx, 30*time.Second, 20*time.Millisecond, "asynq worker up", func() (bool, error) {
		srv, err := q.insp.Servers()
		return err == nil && len(srv) > 0, nil
	})
}

func (q *asynqSystem) submit(ctx context.Context, url string) error {
	_, err := q.client.EnqueueContext(ctx, asynq.NewTask("hit", []byte(url)))
	return err
}

// recorded is the default queue's processed count minus its failures.
func (q *asynqSystem) recorded(context.Context) (int, error) {
	info, err := q.insp.GetQueueInfo("default")
	if err != nil {
		return 0, nil // the queue exists once the first task is enqueued
	}
	return info.Processed - info.Failed, nil
}

func (q *asynqSystem) extra(context.Context) string {
	return fmt.Sprintf("rss_redis=%.0fMiB rss_worker=%.0fMiB", rssOf(q.redis.PID()), rssOf(q.worker.PID()))
}

func (q *asynqSystem) pids() []int { return []int{q.redis.PID(), q.worker.PID()} }

func (q *asynqSystem) stop() {
	if q.client != nil {
		q.client.Close()
		q.insp.Close()
	}
	if q.worker != nil {
		q.worker.Stop(os.Interrupt, 10*time.Second)
	}
	if q.redis != nil {
		q.redis.Stop(os.Interrupt, 10*time.Second)
	}
	q.worker, q.redis, q.client = nil, nil, nil
}

// asynqWorker is the worker process: an asynq.Server with 8 workers whose
// handler GETs the URL in the task payload, and, with -periodic J, an
// asynq.Scheduler with J "@every 1s" entries whose tasks GET -url.
func asynqWorker(args []string) error {
	fs := flag.NewFlagSet("asynq-worker", flag.ContinueOnError)
	addr := fs.String("redis", "", "redis address")
	periodic := fs.Int("periodic", 0, "periodic entries")
	url := fs.String("url", "", "URL of periodic tasks")
	if err := fs.Parse(args); err != nil {
		return err
	}
	opt := asynq.RedisClientOpt{Addr: *addr}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	srv := asynq.NewServer(opt, asynq.Config{Concurrency: 8, LogLevel: asynq.WarnLevel})
	mux := asynq.NewServeMux()
	mux.HandleFunc("hit", func(ctx context.Context, t *asynq.Task) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, string(t.Payload()), nil)
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			return fmt.Errorf("GET: %s", resp.Status)
		}
		return nil
	})
	if err := srv.Start(mux); err != nil {
		return err
	}
	var sch *asynq.Scheduler
	if *periodic > 0 {
		sch = asynq.NewScheduler(opt, &asynq.SchedulerOpts{LogLevel: asynq.WarnLevel})
		for range *periodic {
			if _, err := sch.Register("@every 1s", asynq.NewTask("hit", []byte(*url))); err != nil {
				return err
			}
		}
		if err := sch.Start(); err != nil {
			return err
		}
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	if sch != nil {
		sch.Shutdown()
	}
	srv.Shutdown()
	return nil
}

// haveRedis says whether redis-server is on PATH.
func haveRedis() bool {
	_, err := exec.LookPath("redis-server")
	return err == nil
}

// rssOf returns the resident set size of a process in MiB.
func rssOf(pid int) float64 {
	rss, _ := proc.Mem(pid)
	return rss
}
