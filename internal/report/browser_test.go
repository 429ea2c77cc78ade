package report

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/results"
)

// The browser tests open the report in real headless Chromium. They skip, saying why, when no
// Chromium is installed (.ci/run installs Debian's), and under -short. GPUVET_SCREENSHOT=path keeps the screenshot.

func needChromium(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("real Chromium: end to end, go test without -short runs it")
	}
	if _, err := FindChromium(); err != nil {
		t.Skipf("browser test skipped: %v", err)
	}
}

// consoleLine matches what Chromium logs (--enable-logging=stderr) for any console message of the
// page: errors, CSP violations and uncaught exceptions all arrive as CONSOLE lines.
var consoleLine = regexp.MustCompile(`:CONSOLE[:(]\d+\)?\] (.*)`)

// browse loads page in headless Chromium and returns the DOM after load and the page's console lines.
func browse(t *testing.T, page string) (string, []string) {
	t.Helper()
	dom, stderr, err := runChromium(2*time.Minute, "--enable-logging=stderr", "--v=0", "--window-size=1280,4000", "--dump-dom", fileURL(page))
	if err != nil {
		t.Fatal(err)
	}
	var console []string
	for _, m := range consoleLine.FindAllSubmatch(stderr, -1) {
		console = append(console, string(m[1]))
	}
	for _, l := range strings.Split(string(stderr), "\n") {
		if strings.Contains(l, "net::ERR_") {
			console = append(console, l)
		}
	}
	return string(dom), console
}

// The detector itself must see a broken page, or the real check below proves nothing.
func TestBrowserDetectsConsoleErrors(t *testing.T) {
	needChromium(t)
	page := filepath.Join(t.TempDir(), "bad.html")
	os.WriteFile(page, []byte(`<!DOCTYPE html><html><head><meta http-equiv="Content-Security-Policy" content="default-src 'none'"></head>`+
		`<body><img src="https://cdn.example.invalid/x.png"><svg class="chart"></svg></body></html>`), 0o644)
	dom, console := browse(t, page)
	if len(console) == 0 {
		t.Error("a CSP violation went unnoticed: the console check is blind")
	}
	if err := chartsDrawn(dom); err == nil {
		t.Error("an empty chart passed the drawn-chart check")
	}
}

func TestBrowserRendersReport(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: go test without -short runs it")
	}
	needChromium(t)
	for _, c := range []struct {
		name string
		s    *results.Summary
	}{{"sample", readSample(t)}, {"large", buildSample(largeSample())}, {"sim", readSim(t)}, {"sim-baseline", readFile(t, "sim-baseline-summary.json")}} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			page := filepath.Join(dir, "report.html")
			if err := WriteHTML(c.s, page); err != nil {
				t.Fatal(err)
			}
			dom, console := browse(t, page)
			if len(console) > 0 {
				t.Errorf("console messages from the report:\n%s", strings.Join(console, "\n"))
			}
			if !strings.Contains(dom, `class="badge s-flag">WARN<`) {
				t.Error("the verdict is not in the rendered page")
			}
			for _, f := range allFlags(c.s) {
				if !strings.Contains(dom, domEscape(f.Reason)) {
					t.Errorf("flag not shown in the browser: %s", f.Reason)
				}
			}
			if err := chartsDrawn(dom); err != nil {
				t.Error(err)
			}
			if c.name != "sim" { // the screenshot is of what `gpuvet run --sim` writes
				return
			}
			shot := os.Getenv("GPUVET_SCREENSHOT")
			if shot == "" {
				shot = filepath.Join(dir, "report.png")
			}
			screenshot(t, page, shot)
		})
	}
}

// chartsDrawn checks every <svg class="chart"> in the DOM has plotted marks with real geometry.
func chartsDrawn(dom string) error {
	svgs := regexp.MustCompile(`(?s)<svg class="chart".*?</svg>`).FindAllString(dom, -1)
	if len(svgs) == 0 {
		return errorf("no chart in the page")
	}
	for i, svg := range svgs {
		marks, err := countMarks(svg)
		if err != nil {
			return errorf("chart %d: %v", i, err)
		}
		if marks == 0 {
			return errorf("chart %d (%s) has nothing plotted", i, chartTitle(svg))
		}
	}
	return nil
}

func chartTitle(svg string) string {
	if m := regexp.MustCompile(`<title>([^<]*)</title>`).FindStringSubmatch(svg); m != nil {
		return m[1]
	}
	return "untitled"
}

// countMarks parses one chart as XML and counts marks whose geometry is drawable.
func countMarks(svg string) (int, error) {
	d := xml.NewDecoder(strings.NewReader(svg))
	d.Strict = false
	d.Entity = xml.HTMLEntity
	n := 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		se, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		a := map[string]string{}
		for _, at := range se.Attr {
			a[at.Name.Local] = at.Value
		}
		if !strings.Contains(" "+a["class"]+" ", " mark ") {
			continue
		}
		switch se.Name.Local {
		case "path":
			if strings.Count(a["d"], "L") >= 1 {
				n++
			}
		case "rect":
			if w, _ := strconv.ParseFloat(a["width"], 64); w > 0 {
				n++
			}
		case "circle":
			if r, _ := strconv.ParseFloat(a["r"], 64); r > 0 {
				n++
			}
		}
	}
}

func screenshot(t *testing.T, page, out string) {
	t.Helper()
	if _, _, err := runChromium(2*time.Minute, "--window-size=1280,4000", "--screenshot="+out, fileURL(page)); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("screenshot is not a PNG: %v", err)
	}
	// A blank page is one colour; the report has text, tables and charts in several.
	colours := map[[3]uint32]bool{}
	bd := img.Bounds()
	for y := bd.Min.Y; y < bd.Max.Y; y += 7 {
		for x := bd.Min.X; x < bd.Max.X; x += 7 {
			r, g, b, _ := img.At(x, y).RGBA()
			colours[[3]uint32{r >> 8, g >> 8, b >> 8}] = true
		}
	}
	if len(colours) < 20 {
		t.Errorf("screenshot looks blank (%d colours)", len(colours))
	}
	t.Logf("screenshot: %s (%dx%d)", out, bd.Dx(), bd.Dy())
}

func TestWritePDF(t *testing.T) {
	needChromium(t)
	dir := t.TempDir()
	page := filepath.Join(dir, "report.html")
	if err := WriteHTML(buildSample(largeSample()), page); err != nil {
		t.Fatal(err)
	}
	pdf := filepath.Join(dir, "report.pdf")
	if err := WritePDF(page, pdf); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(pdf)
	if !bytes.HasPrefix(b, []byte("%PDF-")) {
		t.Fatal("not a PDF")
	}
	// every section is printed open: the large report runs to many pages.
	if pages := bytes.Count(b, []byte("/Type /Page\n")) + bytes.Count(b, []byte("/Type /Page ")) + bytes.Count(b, []byte("/Type/Page")); pages > 0 && pages < 4 {
		t.Errorf("%d pages: folded sections were not printed", pages)
	}
	if out := os.Getenv("GPUVET_PDF"); out != "" {
		os.WriteFile(out, b, 0o644)
	}
}

func TestWritePDFWithoutChromium(t *testing.T) {
	t.Setenv("GPUVET_CHROMIUM", "")
	t.Setenv("PATH", t.TempDir())
	err := WritePDF("x.html", filepath.Join(t.TempDir(), "x.pdf"))
	if err == nil || !strings.Contains(err.Error(), "apt-get install chromium") {
		t.Fatalf("want a clear no-Chromium message, got %v", err)
	}
}

func errorf(format string, a ...any) error { return fmt.Errorf(format, a...) }

// domEscape escapes text as Chromium's DOM serialiser does (only &, < and >).
func domEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

func readFile(t testing.TB, name string) *results.Summary {
	t.Helper()
	s, err := results.Read(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Issue 31: a 200-node fleet's report opens in Chromium without a console message (the heat map's
// CSS passes the page's Content-Security-Policy), with every heat-map cell and the ranked list in
// the DOM and the worst hosts' charts drawn.
func TestBrowserRendersFleet(t *testing.T) {
	needChromium(t)
	s := simFleet(t, 200)
	page := filepath.Join(t.TempDir(), "report.html")
	if err := WriteHTML(s, page); err != nil {
		t.Fatal(err)
	}
	dom, console := browse(t, page)
	if len(console) > 0 {
		t.Errorf("console messages from the fleet report:\n%s", strings.Join(console, "\n"))
	}
	if n := len(heatCellRe.FindAllString(dom, -1)); n != 199*8+1 {
		t.Errorf("%d heat-map cells in the DOM, want %d", n, 199*8+1)
	}
	if rows := rankedRow.FindAllStringSubmatch(dom, 3); len(rows) != 3 || rows[0][2] != "gpu-node-0013" || rows[2][2] != "gpu-node-0007" {
		t.Errorf("ranked rows in the DOM: %v", rows)
	}
	if err := chartsDrawn(dom); err != nil {
		t.Error(err)
	}
}
