package report

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// ErrNoChromium is returned by WritePDF when no Chromium or Chrome is installed.
var ErrNoChromium = errors.New("no Chromium found: looked for $GPUVET_CHROMIUM, chromium, chromium-browser, google-chrome, google-chrome-stable on PATH; " +
	"install one (Debian/Ubuntu: apt-get install chromium) or open the HTML report in a browser and print it to PDF")

// chromiumNames are tried in order on PATH.
var chromiumNames = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless_shell"}

// FindChromium returns the browser WritePDF will use: $GPUVET_CHROMIUM when set, else the first of
// chromiumNames on PATH.
func FindChromium() (string, error) {
	if p := os.Getenv("GPUVET_CHROMIUM"); p != "" {
		if path, err := exec.LookPath(p); err == nil {
			return path, nil
		}
		return "", fmt.Errorf("GPUVET_CHROMIUM=%q: not an executable: point it at chromium or unset it", p)
	}
	for _, n := range chromiumNames {
		if path, err := exec.LookPath(n); err == nil {
			return path, nil
		}
	}
	return "", ErrNoChromium
}

// headlessArgs are the flags for a quiet, offline, throw-away headless browser. --no-sandbox lets it
// run as root in containers and CI; it only ever opens gpuvet's own file, which has no script.
func headlessArgs(profileDir string, extra ...string) []string {
	args := []string{"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-extensions",
		"--disable-dev-shm-usage", "--hide-scrollbars", "--mute-audio", "--user-data-dir=" + profileDir}
	return append(args, extra...)
}

// runChromium runs the browser with args plus the page URL, bounded by timeout, and returns its stderr.
func runChromium(timeout time.Duration, args ...string) ([]byte, []byte, error) {
	bin, err := FindChromium()
	if err != nil {
		return nil, nil, err
	}
	profile, err := os.MkdirTemp("", "gpuvet-chromium-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(profile)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, headlessArgs(profile, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+profile) // keep the browser's caches out of the user's home
	ownGroup(cmd)
	cmd.WaitDelay = 5 * time.Second // after a kill, stop waiting for output a stray process still holds
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	if ctx.Err() != nil {
		return stdout.Bytes(), stderr.Bytes(), fmt.Errorf("%s did not finish within %s: %s", bin, timeout, tail(stderr.String(), 5))
	}
	if err != nil {
		return stdout.Bytes(), stderr.Bytes(), fmt.Errorf("%s: %w: %s", bin, err, tail(stderr.String(), 5))
	}
	return stdout.Bytes(), stderr.Bytes(), nil
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// printable returns the report with every collapsible section open: on paper nothing can be clicked.
// Only the template writes "<details": names from the summary are escaped to "&lt;details".
func printable(html []byte) []byte {
	return bytes.ReplaceAll(html, []byte("<details "), []byte("<details open "))
}

// WritePDF prints the HTML report at htmlPath to pdfPath through headless Chromium, with every
// section expanded. It returns ErrNoChromium (wrapped) when no browser is installed.
func WritePDF(htmlPath, pdfPath string) error {
	if _, err := FindChromium(); err != nil {
		return fmt.Errorf("PDF not written: %w", err)
	}
	html, err := os.ReadFile(htmlPath)
	if err != nil {
		return fmt.Errorf("PDF: reading the HTML report: %w", err)
	}
	dir, err := os.MkdirTemp("", "gpuvet-pdf-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	page := filepath.Join(dir, "report.html")
	if err := os.WriteFile(page, printable(html), 0o644); err != nil {
		return err
	}
	out := filepath.Join(dir, "report.pdf")
	if _, _, err := runChromium(2*time.Minute, "--no-pdf-header-footer", "--print-to-pdf-no-header",
		"--run-all-compositor-stages-before-draw", "--print-to-pdf="+out, fileURL(page)); err != nil {
		return fmt.Errorf("PDF not written: %w", err)
	}
	pdf, err := os.ReadFile(out)
	if err != nil || !bytes.HasPrefix(pdf, []byte("%PDF-")) {
		return fmt.Errorf("PDF not written: the browser exited without producing a PDF (%w)", err)
	}
	return writeAtomic(pdfPath, pdf)
}

func fileURL(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}).String()
}

// Render loads the HTML report at page in headless Chromium, waits until every compositor stage
// has run (layout and paint, not just the parse), and returns the DOM it ended with. The
// report-scale benchmark times it: how long a browser takes to show a fleet's report.
func Render(page string, timeout time.Duration) ([]byte, error) {
	dom, _, err := runChromium(timeout, "--run-all-compositor-stages-before-draw", "--window-size=1280,2000", "--dump-dom", fileURL(page))
	return dom, err
}
