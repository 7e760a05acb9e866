package main

import (
	"strings"
	"testing"
	"time"
)

func TestOptionsParse(t *testing.T) {
	ok := options{sizes: "100000, 500000", only: "pending,idle", latN: 1, idle: time.Second}
	if err := ok.parse(); err != nil || len(ok.ns) != 2 || !ok.runs["idle"] || ok.runs["lateness"] {
		t.Fatalf("parse = %v, %+v", err, ok)
	}
	cases := []struct {
		name string
		o    options
		flag string
	}{
		{"bad size", options{sizes: "10,x", only: "idle", latN: 1, idle: time.Second}, "-n"},
		{"zero size", options{sizes: "0", only: "idle", latN: 1, idle: time.Second}, "-n"},
		{"unknown run", options{sizes: "1", only: "idle,speed", latN: 1, idle: time.Second}, "-only"},
		{"lateness n", options{sizes: "1", only: "idle", latN: 0, idle: time.Second}, "-lateness-n"},
		{"idle", options{sizes: "1", only: "idle", latN: 1, idle: 0}, "-idle"},
		{"idle n", options{sizes: "1", only: "idle", latN: 1, idle: time.Second, idleN: -1}, "-idle-n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.parse()
			if err == nil || !strings.HasPrefix(err.Error(), tc.flag+":") {
				t.Fatalf("parse = %v, want an error naming %s", err, tc.flag)
			}
		})
	}
}
