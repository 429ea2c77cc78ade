// Package report turns a summary.json into what people and machines read: a self-contained HTML
// report (inline SVG charts, no script, no network), a PDF through headless Chromium, JUnit XML for
// CI systems and a Prometheus textfile for dashboards. It reads results.Summary only.
package report

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"html/template"
	"io"
	"path/filepath"

	"github.com/gpuvet/gpuvet/internal/results"
)

//go:embed report.html.tmpl
var pageTmpl string

//go:embed report.css
var pageCSS string

// html/template escapes every name taken from the summary (models, hosts, reasons are outside input).
var tmpl = template.Must(template.New("report").Parse(pageTmpl))

// RenderHTML writes the report of s to w.
func RenderHTML(s *results.Summary, w io.Writer) error {
	if s == nil {
		return fmt.Errorf("report: no summary to render")
	}
	p := buildPage(s)
	data := struct {
		*page
		CSS template.CSS
	}{p, template.CSS(pageCSS)}
	return tmpl.Execute(w, data)
}

// WriteHTML writes the report of s to path, atomically (a reader never sees half a file).
func WriteHTML(s *results.Summary, path string) error {
	var b bytes.Buffer
	if err := RenderHTML(s, &b); err != nil {
		return err
	}
	return writeAtomic(path, b.Bytes())
}

// writeAtomic writes data to path atomically (results.ReplaceFile); the temp file's name does not
// end in .prom, so node-exporter's textfile collector never reads a partial file.
func writeAtomic(path string, data []byte) error {
	return results.ReplaceFile(path, func(w io.Writer) error {
		if _, err := w.Write(data); err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
		return nil
	})
}

// writeFile writes render(s) to path atomically (node-exporter never reads half a textfile).
func writeFile(render func(*results.Summary) ([]byte, error), s *results.Summary, path string) error {
	b, err := render(s)
	if err != nil {
		return err
	}
	return writeAtomic(path, b)
}

// Standard file names WriteDir uses inside a run's output directory.
const (
	HTMLFile       = "report.html"
	JUnitFile      = "junit.xml"
	PrometheusFile = "gpuvet.prom"
)

// WriteDir writes the chosen reports of s into dir under their standard names (the run pipeline's
// report step). A report that fails does not stop the others; the errors come back joined.
func WriteDir(s *results.Summary, dir string, html, junit, prom bool) error {
	var errs []error
	if html {
		errs = append(errs, WriteHTML(s, filepath.Join(dir, HTMLFile)))
	}
	if junit {
		errs = append(errs, WriteJUnit(s, filepath.Join(dir, JUnitFile)))
		errs = append(errs, WriteCTRF(s, filepath.Join(dir, CTRFFile))) // aicr's format, beside JUnit
	}
	if prom {
		errs = append(errs, WritePrometheus(s, filepath.Join(dir, PrometheusFile)))
	}
	return errors.Join(errs...)
}
