package gpu

import (
	"bufio"
	"bytes"
	"cmp"
	"regexp"
	"strconv"
	"strings"

	"github.com/gpuvet/gpuvet/internal/results"
)

// The kernel log's NVIDIA driver lines (issue: the driver's own signals never pass silently). The
// driver says in the kernel ring buffer what NVML may no longer show: a GPU that fell off the bus,
// one that needs a reset, one it could not initialise, GSP firmware that stopped answering, every
// Xid since boot. The health phase reads the buffer (a source's KernelLog) and ParseKernelLog turns
// its text into events; judge.Health decides what each asks for.

// KernelLogText is the kernel log as read: /dev/kmsg records ("PRI,SEQ,USEC,FLAGS;MSG") or dmesg
// lines ("[ SECONDS] MSG"), one a line.
type KernelLogText struct {
	Source    string // "/dev/kmsg", "sim"
	Text      []byte // the lines kept (the driver's; others may be dropped)
	Records   int    // records read, the driver's or not
	Truncated bool   // the read stopped at its bound
}

// KernelLogger is a Source that can read its host's kernel log (NVML on a live host, the
// simulator); a capture has none.
type KernelLogger interface {
	KernelLog() (KernelLogText, error)
}

// The bounds of a kernel-log read: the ring buffer is rarely over a few MiB, and only the driver's
// lines are kept.
const (
	MaxKernelLogBytes   = 4 << 20
	MaxKernelLogRecords = 20000
)

var (
	// xidRe: "Xid (PCI:0000:18:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
	xidRe = regexp.MustCompile(`^Xid \(([^)]*)\): (\d+)`)
	// busRe finds a PCI address: "0000:18:00.0", "00000000:18:00.0", "PCI:0000:18:00", "18:00.0".
	busRe = regexp.MustCompile(`(?i)(?:PCI:)?\b((?:[0-9a-f]{4,8}:)?[0-9a-f]{2}:[0-9a-f]{2}(?:\.[0-7])?)\b`)
	// gpuAtRe: "GPU at PCI:0000:18:00: GPU-8f3c…" names the GPU at an address (context only).
	gpuAtRe = regexp.MustCompile(`^GPU at (?:PCI:)?([0-9A-Fa-f:.]+): (GPU-[0-9A-Fa-f-]+)`)
)

// NormalizeBusID writes a PCI address the way every reader compares them: "0000:18:00" (domain of
// four hex digits, bus, device; no function: a GPU is function 0). NVML's "00000000:18:00.0", the
// driver's "PCI:0000:18:00" and "0000:18:00.0", and "18:00.0" all read the same. "" when s is none.
func NormalizeBusID(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	s = strings.TrimPrefix(s, "pci:")
	s, _, _ = strings.Cut(s, ".")
	parts := strings.Split(s, ":")
	switch len(parts) {
	case 2:
		parts = append([]string{"0000"}, parts...)
	case 3:
	default:
		return ""
	}
	dom, bus, dev := parts[0], parts[1], parts[2]
	if len(dom) > 4 {
		dom = dom[len(dom)-4:]
	}
	dom = strings.Repeat("0", 4-len(dom)) + dom
	if len(bus) != 2 || len(dev) != 2 || !isHex(dom+bus+dev) {
		return ""
	}
	return dom + ":" + bus + ":" + dev
}

func isHex(s string) bool { return s != "" && strings.Trim(s, "0123456789abcdef") == "" }

// ParseKernelLog reads kernel-log text and returns the NVIDIA driver's lines that say something is
// wrong with a GPU, in order: a GPU fallen off the bus, one that requires a reset, a failed
// RmInitAdapter, a GSP timeout, an Xid. Lines that only give context ("GPU at PCI:… GPU-…", the
// board serial) add the GPU's UUID to the events at that address. Anything else is skipped, and
// so is a line it cannot read.
func ParseKernelLog(text []byte) []results.KernelEvent {
	var out []results.KernelEvent
	uuids := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		ev, ok, ctx := ParseKernelLine(sc.Text())
		if ctx.BusID != "" {
			uuids[ctx.BusID] = ctx.UUID
		}
		if ok {
			out = append(out, ev)
		}
	}
	for i := range out {
		out[i].UUID = cmp.Or(out[i].UUID, uuids[out[i].BusID])
	}
	return out
}

// ParseKernelLine reads one line. ok: a driver line about a GPU (ev); ctx: a context line naming the
// GPU at an address (ctx.BusID, ctx.UUID).
func ParseKernelLine(line string) (ev results.KernelEvent, ok bool, ctx results.KernelEvent) {
	line = strings.TrimRight(line, "\r\n")
	if strings.HasPrefix(line, " ") { // a /dev/kmsg continuation ("␠SUBSYSTEM=pci")
		return ev, false, ctx
	}
	i := strings.Index(line, "NVRM: ")
	if i < 0 {
		return ev, false, ctx
	}
	seq, ts := linePrefix(line[:i])
	msg := strings.TrimSpace(line[i+len("NVRM: "):])
	if m := gpuAtRe.FindStringSubmatch(msg); m != nil {
		return ev, false, results.KernelEvent{BusID: NormalizeBusID(m[1]), UUID: m[2]}
	}
	ev = results.KernelEvent{Seq: seq, TimeS: ts, Line: "NVRM: " + msg}
	lower := strings.ToLower(msg)
	if m := xidRe.FindStringSubmatch(msg); m != nil {
		ev.BusID = NormalizeBusID(m[1])
		n, err := strconv.Atoi(m[2])
		if err != nil || n <= 0 || n > 1<<20 {
			return results.KernelEvent{}, false, ctx
		}
		ev.XID = n
		switch {
		case n == 79 || strings.Contains(lower, "fallen off the bus"):
			ev.Kind = results.KernelFallenOffBus
		case n == 119:
			ev.Kind = results.KernelGSPTimeout
		default:
			ev.Kind = results.KernelXID
		}
		return ev, true, ctx
	}
	switch {
	case strings.Contains(lower, "fallen off the bus"):
		ev.Kind = results.KernelFallenOffBus
	case strings.Contains(lower, "requires reset"):
		ev.Kind = results.KernelRequiresReset
	case strings.Contains(lower, "rminitadapter failed"), strings.Contains(lower, "rm_init_adapter failed"):
		ev.Kind = results.KernelRmInitFailed
	case strings.Contains(lower, "heartbeat timed out"), strings.Contains(lower, "timeout waiting for gsp"),
		strings.Contains(lower, "gsp rpc timeout"), strings.Contains(lower, "kgspisheartbeattimedout"):
		ev.Kind = results.KernelGSPTimeout
	default:
		return results.KernelEvent{}, false, ctx
	}
	if m := busRe.FindStringSubmatch(msg); m != nil {
		ev.BusID = NormalizeBusID(m[1])
	}
	return ev, true, ctx
}

// linePrefix reads the record's sequence number (/dev/kmsg "PRI,SEQ,USEC,FLAGS;") or the seconds
// since boot (dmesg "[ 1234.567890] "); zeros when neither.
func linePrefix(p string) (seq int64, ts float64) {
	p = strings.TrimSpace(p)
	if head, _, ok := strings.Cut(p, ";"); ok {
		f := strings.Split(head, ",")
		if len(f) >= 3 {
			seq, _ = strconv.ParseInt(f[1], 10, 64)
			if us, err := strconv.ParseInt(f[2], 10, 64); err == nil && us >= 0 {
				ts = float64(us) / 1e6
			}
		}
		return max(seq, 0), ts
	}
	if strings.HasPrefix(p, "[") {
		if end := strings.IndexByte(p, ']'); end > 0 {
			if v, err := strconv.ParseFloat(strings.TrimSpace(p[1:end]), 64); err == nil && v >= 0 && v < 1e12 {
				ts = v
			}
		}
	}
	return 0, ts
}
