package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/axsched/ax/bench/internal/proc"
)

// The fleet API under a steady fleet: GET /v1/agents?limit=100 paged the
// way an operator's `agent ls` pages, one request at a time, following
// each page's next cursor (from the start again after the last page):
// without a filter, with a label selector (one site of sites, labels.go's
// selector) and with online=true. Its round trips are measured per kind.

// sites is how many site labels the simulated agents are spread over
// (site=s00 … ; every agent also has role=sim).
const sites = 20

// siteOf returns agent i's site label value.
func siteOf(i int) string { return fmt.Sprintf("s%02d", i%sites) }

// listKind is one kind of paged agents request.
type listKind struct {
	name  string
	query url.Values // besides limit and after
	n     int        // requests
}

// agentsListPhase sends the paged requests of each kind and prints their
// round trips, the agents per page and the bytes per page.
func (s *sim) agentsListPhase(ctx context.Context, api string) error {
	kinds := []listKind{
		{name: "all", query: url.Values{}, n: 100},
		{name: "label site=" + siteOf(3), query: url.Values{"label": {"site=" + siteOf(3)}}, n: 50},
		{name: "online=true", query: url.Values{"online": {"true"}}, n: 50},
	}
	var all []time.Duration
	for _, k := range kinds {
		var rtt []time.Duration
		after, agents, bytes := "", 0, 0
		for range k.n {
			q := url.Values{"limit": {"100"}}
			for key, v := range k.query {
				q[key] = v
			}
			if after != "" {
				q.Set("after", after)
			}
			t0 := time.Now()
			page, n, err := getAgentsPage(ctx, api+"/v1/agents?"+q.Encode())
			if err != nil {
				return fmt.Errorf("agents list %s: %w", k.name, err)
			}
			rtt = append(rtt, time.Since(t0))
			agents += len(page.Agents)
			bytes += n
			after = page.Next
		}
		all = append(all, rtt...)
		fmt.Printf("GET /v1/agents?limit=100 (%s): %d requests, RTT p50 %s p99 %s max %s; %d agents, %d KiB per page on average\n",
			k.name, k.n, pct(rtt, .5), pct(rtt, .99), pct(rtt, 1), agents/k.n, bytes/k.n>>10)
	}
	fmt.Printf("GET /v1/agents?limit=100 (all kinds): %d requests, RTT p50 %s p99 %s; %s\n",
		len(all), pct(all, .5), pct(all, .99), "load "+proc.LoadAvg())
	return nil
}

// agentsPage is the part of GET /v1/agents' answer read here.
type agentsPage struct {
	Agents []json.RawMessage `json:"agents"`
	Next   string            `json:"next"`
}

// getAgentsPage reads one page, and how many bytes its body had.
func getAgentsPage(ctx context.Context, u string) (agentsPage, int, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return agentsPage{}, 0, err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return agentsPage{}, 0, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return agentsPage{}, 0, err
	}
	if res.StatusCode != http.StatusOK {
		return agentsPage{}, 0, fmt.Errorf("%s: %s", res.Status, b)
	}
	var p agentsPage
	if err := json.Unmarshal(b, &p); err != nil {
		return agentsPage{}, 0, fmt.Errorf("decode: %w", err)
	}
	return p, len(b), nil
}
