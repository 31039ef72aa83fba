// Command testimage is PID 1 of rebalancer's e2e test image and of the real
// nodes' pause image. It logs every signal it receives with a timestamp, reaps
// children, optionally becomes ready after a delay, and exits a configurable time
// after SIGTERM (or SIGINT).
//
// Environment:
//
//	TERM_DELAY     seconds between SIGTERM and exit (float, default 0); "never"
//	               ignores SIGTERM (the kubelet kills it when the grace period ends)
//	READY_AFTER    seconds after start before becoming ready (float, default 0)
//	READY_FILE     path created when ready (for an exec probe: test -e PATH)
//	HTTP_ADDR      address for an HTTP server: /ready answers 200 once ready,
//	               503 before; /healthz answers 200 (e.g. ":8080")
//	EXIT_CODE      exit status after SIGTERM (default 0)
//	LOG_DIR        also append every log line to LOG_DIR/<hostname>.log (a hostPath
//	               volume keeps the lines after the kubelet removed the pod's logs)
//
// Arguments: "check PATH" exits 0 if PATH exists, 1 otherwise (for exec probes,
// the image has no shell). Log lines go to stdout, one per event:
//
//	2026-11-24T06:30:00.123456Z testimage pid=1 event=signal signal=terminated
package main

import (
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
)

var logFile *os.File

func logf(event string, format string, args ...any) {
	ts := time.Now().UTC().Format("2006-01-02T15:04:05.000000Z")
	line := fmt.Sprintf("%s testimage pid=%d event=%s %s\n", ts, os.Getpid(), event, fmt.Sprintf(format, args...))
	os.Stdout.WriteString(line)
	if logFile != nil {
		logFile.WriteString(line)
		logFile.Sync()
	}
}

func seconds(name string, def float64) float64 {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 {
		fmt.Fprintf(os.Stderr, "testimage: %s=%q is not a non-negative number of seconds\n", name, v)
		os.Exit(2)
	}
	return f
}

func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
		logf("reaped", "child=%d status=%d", pid, ws.ExitStatus())
	}
}

func main() {
	if len(os.Args) == 3 && os.Args[1] == "check" {
		if _, err := os.Stat(os.Args[2]); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	if len(os.Args) == 2 && os.Args[1] == "version" {
		fmt.Println("testimage 1")
		os.Exit(0)
	}
	if dir := os.Getenv("LOG_DIR"); dir != "" {
		host, _ := os.Hostname()
		f, err := os.OpenFile(dir+"/"+host+".log", os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			fmt.Fprintf(os.Stderr, "testimage: LOG_DIR: %v\n", err)
			os.Exit(2)
		}
		logFile = f
	}
	ignoreTerm := os.Getenv("TERM_DELAY") == "never"
	termDelay := 0.0
	if !ignoreTerm {
		termDelay = seconds("TERM_DELAY", 0)
	}
	readyAfter := seconds("READY_AFTER", 0)
	exitCode := 0
	if v := os.Getenv("EXIT_CODE"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			fmt.Fprintf(os.Stderr, "testimage: EXIT_CODE=%q is not an integer\n", v)
			os.Exit(2)
		}
		exitCode = n
	}
	readyFile := os.Getenv("READY_FILE")
	var ready atomic.Bool

	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs) // every catchable signal
	logf("start", "term_delay=%q ready_after=%g ready_file=%q http=%q",
		os.Getenv("TERM_DELAY"), readyAfter, readyFile, os.Getenv("HTTP_ADDR"))

	if addr := os.Getenv("HTTP_ADDR"); addr != "" {
		mux := http.NewServeMux()
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusOK)
		})
		mux.HandleFunc("/ready", func(w http.ResponseWriter, _ *http.Request) {
			if ready.Load() {
				w.WriteHeader(http.StatusOK)
				return
			}
			w.WriteHeader(http.StatusServiceUnavailable)
		})
		go func() {
			if err := http.ListenAndServe(addr, mux); err != nil {
				logf("http-error", "err=%q", err.Error())
			}
		}()
	}

	becomeReady := func() {
		if readyFile != "" {
			if err := os.WriteFile(readyFile, []byte("ready\n"), 0o644); err != nil {
				logf("ready-error", "err=%q", err.Error())
				return
			}
		}
		ready.Store(true)
		logf("ready", "after=%g", readyAfter)
	}
	readyTimer := time.AfterFunc(time.Duration(readyAfter*float64(time.Second)), becomeReady)

	var exitAt <-chan time.Time
	for {
		select {
		case s := <-sigs:
			if s == syscall.SIGCHLD {
				reap()
				continue
			}
			if s == syscall.SIGURG { // Go runtime preemption; not a real signal to log
				continue
			}
			logf("signal", "signal=%s", s.String())
			if (s == syscall.SIGTERM || s == syscall.SIGINT) && !ignoreTerm && exitAt == nil {
				readyTimer.Stop()
				exitAt = time.After(time.Duration(termDelay * float64(time.Second)))
			}
		case <-exitAt:
			logf("exit", "code=%d", exitCode)
			os.Exit(exitCode)
		}
	}
}
