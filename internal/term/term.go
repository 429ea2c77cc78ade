// Package term is gpuvet's terminal output: tables in one style, the one-line markers
// (CLIENT-LIMITED, LOWER BOUND, n=…) and titled blocks of one-line items (flags, caveats), and
// progress (a live line on a terminal, plain lines otherwise). Every command's terminal output goes
// through it, so they all look alike.
package term

import (
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	xterm "golang.org/x/term"
)

// Markers on figures and rows.
const (
	ClientLimited = "CLIENT-LIMITED"
	LowerBound    = "LOWER BOUND"
)

// Table writes aligned columns: a header, then rows, two spaces between columns; numbers right-
// aligned when the table asks for it.
type Table struct {
	tw *tabwriter.Writer
}

// Columns is the one column style of gpuvet's tables (for code that writes tab-separated lines):
// two spaces between columns, left-aligned.
func Columns(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0) }

// NumColumns is Columns with right-aligned cells (tables of figures).
func NumColumns(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
}

// NewTable starts a table with its header (left-aligned columns).
func NewTable(w io.Writer, header ...string) *Table {
	t := &Table{tw: Columns(w)}
	t.Row(header...)
	return t
}

// Row adds one row; an empty cell prints "-".
func (t *Table) Row(cells ...string) {
	for i, c := range cells {
		if c == "" {
			cells[i] = "-"
		}
	}
	fmt.Fprintln(t.tw, strings.Join(cells, "\t")+"\t")
}

// Flush writes the table.
func (t *Table) Flush() { t.tw.Flush() }

// Block prints a titled block of one-line items, each once, indented; nothing when there are none.
func Block(w io.Writer, title string, items []string) {
	seen := map[string]bool{}
	var out []string
	for _, s := range items {
		s = strings.TrimSpace(s)
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return
	}
	fmt.Fprintln(w, "\n"+title)
	for _, s := range out {
		fmt.Fprintln(w, "  "+s)
	}
}

// N is a figure with its sample count, e.g. "9.5 ms (n=5)".
func N(figure string, n int) string { return fmt.Sprintf("%s (n=%d)", figure, n) }

// IsTerminal reports whether w is a terminal (a live line can be drawn on it).
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && xterm.IsTerminal(int(f.Fd()))
}
