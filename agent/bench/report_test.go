//go:build bench

package bench

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Flags of `go tool task bench`.
var (
	quick  = flag.Bool("quick", false, "small sizes and short runs: the whole bench in under 3 minutes")
	output = flag.String("output", "", "write the result table as Markdown to this file")
	only   = flag.String("only", "", "run only these rows, comma-separated (B1,B3,...)")
)

// Row is one line of the result table.
type Row struct {
	ID       string // B1 … B6, or B1-full for the full-push baseline
	What     string
	Target   string
	Measured string // median, p99, min–max, as fits the row
	Pass     bool
	NoTarget bool // a reference figure: no pass or fail
	Note     string
}

var (
	rowsMu sync.Mutex
	rows   []Row
)

// report adds a row to the table and logs it.
func report(t testing.TB, r Row) {
	t.Helper()
	rowsMu.Lock()
	rows = append(rows, r)
	rowsMu.Unlock()
	t.Logf("%s %s: %s (target %s) %s %s", r.ID, r.What, r.Measured, r.Target, verdict(r), r.Note)
}

func verdict(r Row) string {
	switch {
	case r.NoTarget:
		return "—"
	case r.Pass:
		return "pass"
	}
	return "**FAIL**"
}

// wanted says whether row id is to run.
func wanted(id string) bool {
	if *only == "" {
		return true
	}
	return slices.Contains(strings.Split(*only, ","), id)
}

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	table := markdown()
	fmt.Print("\n" + table)
	if *output != "" {
		if err := os.WriteFile(*output, []byte(table), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

func markdown() string {
	var b strings.Builder
	mode := "full"
	if *quick {
		mode = "quick"
	}
	fmt.Fprintf(&b, "Benchmark (%s mode), %s\n\n", mode, time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(&b, "Commit: %s\n\n", commit())
	fmt.Fprintf(&b, "Machine: %d CPUs (%s), %s, %s, %s\n\n", runtime.NumCPU(), cpuModel(), runtime.Version(), command("nginx", "-v"), command("wrk", "--version"))
	b.WriteString("| # | what | target | measured | result | note |\n|---|---|---|---|---|---|\n")
	rowsMu.Lock()
	defer rowsMu.Unlock()
	sorted := slices.Clone(rows)
	slices.SortStableFunc(sorted, func(a, b Row) int { return strings.Compare(a.ID, b.ID) })
	for _, r := range sorted {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", r.ID, r.What, r.Target, r.Measured, verdict(r), r.Note)
	}
	return b.String()
}

// commit names the code measured: the checked-out commit, and whether
// files of the product (not this report) differ from it.
func commit() string {
	head := command("git", "rev-parse", "--short=12", "HEAD")
	if strings.Contains(head, "not found") || strings.Contains(head, "fatal") {
		return "unknown (not a git checkout)"
	}
	changed := command("git", "status", "--porcelain", "--", "../../agent", "../../lua", "../../templates", ":!../../agent/bench/RESULTS.md")
	if changed != "" {
		return head + " with uncommitted changes (" + changed + " …)"
	}
	return head
}

func cpuModel() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for _, line := range strings.Split(string(data), "\n") {
		if name, ok := strings.CutPrefix(line, "model name"); ok {
			return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(name), ":"))
		}
	}
	return "unknown CPU"
}

// command returns the first line a program prints, or "NAME: not found".
func command(name string, args ...string) string {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil && len(out) == 0 {
		return name + ": not found"
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return line
}

// stats summarises durations.
type stats struct {
	n                  int
	min, p50, p99, max time.Duration
}

func summarize(d []time.Duration) stats {
	if len(d) == 0 {
		return stats{}
	}
	s := slices.Clone(d)
	slices.Sort(s)
	at := func(q float64) time.Duration { return s[min(len(s)-1, int(q*float64(len(s))))] }
	return stats{n: len(s), min: s[0], p50: at(0.50), p99: at(0.99), max: s[len(s)-1]}
}

func (s stats) String() string {
	return fmt.Sprintf("p50 %s, p99 %s, min–max %s–%s (n=%d)", ms(s.p50), ms(s.p99), ms(s.min), ms(s.max), s.n)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
