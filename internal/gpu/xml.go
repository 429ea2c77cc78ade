package gpu

import (
	"bytes"
	"cmp"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/gpuvet/gpuvet/internal/catalog"
	"github.com/gpuvet/gpuvet/internal/filelimit"
	"github.com/gpuvet/gpuvet/internal/results"
)

// smiLog is the part of `nvidia-smi -q -x` (DTD nvsmi_device_v1x) that gpuvet reads.
type smiLog struct {
	XMLName       xml.Name `xml:"nvidia_smi_log"`
	DriverVersion string   `xml:"driver_version"`
	CUDAVersion   string   `xml:"cuda_version"`
	AttachedGPUs  string   `xml:"attached_gpus"`
	GPUs          []smiGPU `xml:"gpu"`
}

type smiGPU struct {
	ID           string `xml:"id,attr"`
	ProductName  string `xml:"product_name"`
	Architecture string `xml:"product_architecture"`
	Persistence  string `xml:"persistence_mode"`
	Serial       string `xml:"serial"`
	UUID         string `xml:"uuid"`
	VBIOS        string `xml:"vbios_version"`
	NUMANode     string `xml:"numa_node"` // newer drivers only
	PCI          struct {
		BusID  string `xml:"pci_bus_id"`
		GenMax string `xml:"pci_gpu_link_info>pcie_gen>max_link_gen"`
		GenCur string `xml:"pci_gpu_link_info>pcie_gen>current_link_gen"`
		WMax   string `xml:"pci_gpu_link_info>link_widths>max_link_width"`
		WCur   string `xml:"pci_gpu_link_info>link_widths>current_link_width"`
	} `xml:"pci"`
	Reasons struct {
		Items []smiValue `xml:",any"`
	} `xml:"clocks_event_reasons"`
	// Drivers before 535 call it clocks_throttle_reasons.
	ThrottleReasons struct {
		Items []smiValue `xml:",any"`
	} `xml:"clocks_throttle_reasons"`
	FBTotal string `xml:"fb_memory_usage>total"`
	FBUsed  string `xml:"fb_memory_usage>used"`
	GPUUtil string `xml:"utilization>gpu_util"`
	ECCMode string `xml:"ecc_mode>current_ecc"`
	ECC     struct {
		Volatile  smiECCCounts `xml:"volatile"`
		Aggregate smiECCCounts `xml:"aggregate"`
	} `xml:"ecc_errors"`
	RetiredPending string `xml:"retired_pages>pending_retirement"`
	Remapped       *struct {
		Corr    string `xml:"remapped_row_corr"`
		Unc     string `xml:"remapped_row_unc"`
		Pending string `xml:"remapped_row_pending"`
		Failure string `xml:"remapped_row_failure"`
	} `xml:"remapped_rows"`
	// RecoveryAction is what the driver asks for (driver ≥ 550): "None", "GPU Reset", "Node Reboot", …
	RecoveryAction string `xml:"gpu_recovery_action"`
	// Fabric is the NVLink fabric registration (NVSwitch systems); N/A elsewhere.
	Fabric struct {
		State  string `xml:"state"`
		Status string `xml:"status"`
		Health string `xml:"health>summary"`
	} `xml:"fabric"`
	Temp       string `xml:"temperature>gpu_temp"`
	PowerDraw  string `xml:"gpu_power_readings>instant_power_draw"`
	PowerAvg   string `xml:"gpu_power_readings>average_power_draw"`
	PowerLimit string `xml:"gpu_power_readings>current_power_limit"`
	// Drivers before 535 keep power under power_readings.
	OldPowerDraw  string `xml:"power_readings>power_draw"`
	OldPowerLimit string `xml:"power_readings>power_limit"`
	SMClock       string `xml:"clocks>sm_clock"`
	MaxSMClock    string `xml:"max_clocks>sm_clock"`
	// Processes is <processes>: nil when the capture has no such element.
	Processes *struct {
		Items []smiProcess `xml:"process_info"`
	} `xml:"processes"`
}

// smiProcess is one <process_info> of <processes>.
type smiProcess struct {
	PID  string `xml:"pid"`
	Type string `xml:"type"` // "C", "G", "C+G"
	Name string `xml:"process_name"`
	Used string `xml:"used_memory"` // "8300 MiB"
}

type smiValue struct {
	XMLName xml.Name
	Value   string `xml:",chardata"`
}

// smiECCCounts covers both layouts: per-kind counters (driver ≥ 535) and single/double bit totals.
type smiECCCounts struct {
	SRAMCorr      string `xml:"sram_correctable"`
	SRAMUncParity string `xml:"sram_uncorrectable_parity"`
	SRAMUncSECDED string `xml:"sram_uncorrectable_secded"`
	SRAMUnc       string `xml:"sram_uncorrectable"`
	DRAMCorr      string `xml:"dram_correctable"`
	DRAMUnc       string `xml:"dram_uncorrectable"`
	SingleBit     string `xml:"single_bit>total"`
	DoubleBit     string `xml:"double_bit>total"`
}

// xmlSource is a captured `nvidia-smi -q -x`: inventory only, no live telemetry.
type xmlSource struct {
	path string
	gpus []results.GPUInfo
	occ  []results.Occupancy
}

// FromNvidiaSMIXML reads a captured `nvidia-smi -q -x`. Sample returns an error saying it is a capture.
// cat fills in what the XML does not print (compute capability); nil: the built-in catalog. Values the
// capture lacks or marks N/A stay nil and are listed in GPUInfo.Unsupported; a value that is there but
// unreadable is listed too, with the text found.
func FromNvidiaSMIXML(path string, cat *catalog.Catalog) (Source, error) {
	b, err := filelimit.Read(path, filelimit.GPUXML, "nvidia-smi XML")
	if err != nil {
		return nil, fmt.Errorf("--nvidia-smi-xml: %w (want the output of `nvidia-smi -q -x` saved to a file)", err)
	}
	log, err := decodeSMI(b)
	if err != nil {
		return nil, fmt.Errorf("--nvidia-smi-xml %s: %w", path, err)
	}
	return log.source(path, cat), nil
}

// source reads every GPU's inventory and occupancy from the capture.
func (log *smiLog) source(path string, cat *catalog.Catalog) *xmlSource {
	s := &xmlSource{path: path}
	driver, cuda := strings.TrimSpace(log.DriverVersion), strings.TrimSpace(log.CUDAVersion)
	for i, g := range log.GPUs {
		s.gpus = append(s.gpus, g.info(i, driver, cuda, cat))
		s.occ = append(s.occ, g.occupancy())
	}
	return s
}

// Occupancy is what the capture shows on GPU i: its <processes> (none is Own: gpuvet was not
// running when it was taken), memory in use, utilisation and power at the moment of the capture.
func (s *xmlSource) Occupancy(i int) (results.Occupancy, error) {
	if i < 0 || i >= len(s.occ) {
		return results.Occupancy{}, fmt.Errorf("GPU %d: the capture has GPUs 0-%d", i, len(s.occ)-1)
	}
	return s.occ[i], nil
}

func (s *xmlSource) GPUs() ([]results.GPUInfo, error) {
	return append([]results.GPUInfo(nil), s.gpus...), nil
}

func (s *xmlSource) Sample(i int) (results.PowerSample, error) {
	return results.PowerSample{}, fmt.Errorf("GPU %d: %s is an nvidia-smi capture, not a live GPU: no telemetry to sample (run on the GPU host for NVML)", i, s.path)
}

func (s *xmlSource) Close() error { return nil }

func (g smiGPU) occupancy() results.Occupancy {
	p := &fieldParser{}
	o := results.Occupancy{Samples: 1, MemoryUsedMiB: p.mib("memory_used", g.FBUsed)}
	o.UtilPct = p.int("gpu_util", g.GPUUtil, "%")
	o.PowerW = p.float("power_draw", first(g.PowerDraw, g.PowerAvg, g.OldPowerDraw), "W")
	o.PowerLimitW = p.float("power_limit", first(g.PowerLimit, g.OldPowerLimit), "W")
	if g.Processes == nil {
		p.missing("processes: not in this capture")
	} else {
		o.ProcessesListed = true
		for _, it := range g.Processes.Items {
			pid, err := strconv.Atoi(strings.TrimSpace(it.PID))
			if err != nil {
				p.missing(fmt.Sprintf("process pid: cannot read %q as an integer", strings.TrimSpace(it.PID)))
				continue
			}
			gp := results.GPUProcess{PID: pid, Name: baseName(na(it.Name)), Type: smiProcessType(it.Type),
				UsedMiB: p.mib("process used_memory", it.Used)}
			o.Processes = addProcess(o.Processes, gp)
		}
	}
	o.Notes = p.notes
	return o
}

func smiProcessType(t string) string {
	if n, ok := map[string]string{"C": "compute", "G": "graphics", "C+G": "compute+graphics"}[strings.TrimSpace(t)]; ok {
		return n
	}
	return na(t)
}

// decodeSMI decodes and checks a capture: well-formed, at least one GPU, and its two GPU counts agree.
func decodeSMI(data []byte) (*smiLog, error) {
	var log smiLog
	dec := xml.NewDecoder(bytes.NewReader(data))
	// The DOCTYPE names a DTD that is never fetched; non-UTF-8 charsets are passed through as bytes.
	dec.CharsetReader = func(_ string, r io.Reader) (io.Reader, error) { return r, nil }
	if err := dec.Decode(&log); err != nil {
		var se *xml.SyntaxError
		if errors.As(err, &se) {
			return nil, fmt.Errorf("not well-formed XML at line %d: %s (want the unedited output of `nvidia-smi -q -x`)", se.Line, se.Msg)
		}
		return nil, fmt.Errorf("cannot read as nvidia-smi XML: %w (want the output of `nvidia-smi -q -x`, root element <nvidia_smi_log>)", err)
	}
	if err := trailing(dec); err != nil {
		return nil, err
	}
	if len(log.GPUs) == 0 {
		return nil, fmt.Errorf("no <gpu> element in <nvidia_smi_log> (attached_gpus=%q): the capture lists no GPU", strings.TrimSpace(log.AttachedGPUs))
	}
	// The file states its GPU count twice: a capture whose two counts disagree was edited, cut or
	// concatenated, and none of its figures can be trusted.
	if a := strings.TrimSpace(log.AttachedGPUs); a != "" {
		n, err := strconv.Atoi(a)
		switch {
		case err == nil && n > len(log.GPUs):
			// `nvidia-smi -q -x -i 0` prints the host's count beside the one GPU it was asked for.
			return nil, fmt.Errorf("attached_gpus=%s but the capture has %d <gpu> element(s): a capture of some GPUs only (`nvidia-smi -q -x -i …`) or a cut file; want every GPU: `nvidia-smi -q -x` without -i", a, len(log.GPUs))
		case err != nil || n != len(log.GPUs):
			return nil, fmt.Errorf("attached_gpus=%q but the capture has %d <gpu> elements: the file is edited or concatenated (want the unedited output of `nvidia-smi -q -x`)", a, len(log.GPUs))
		}
	}
	return &log, nil
}

// trailing checks what follows the document: whitespace, comments and processing instructions
// only. A second capture appended to the file (`>>`) is refused, not ignored: its counts agree with
// themselves, so only this says the file holds two moments.
func trailing(dec *xml.Decoder) error {
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("after </nvidia_smi_log>: %w (want one capture per file: the unedited output of `nvidia-smi -q -x`)", err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			return fmt.Errorf("another <%s> element after </nvidia_smi_log>: the file holds more than one capture (two `nvidia-smi -q -x >>` runs?); want one per file", t.Name.Local)
		case xml.CharData:
			if len(bytes.TrimSpace(t)) > 0 {
				return fmt.Errorf("text after </nvidia_smi_log>: %.40q (want the unedited output of `nvidia-smi -q -x`)", bytes.TrimSpace(t))
			}
		}
	}
}

func (g smiGPU) info(index int, driver, cuda string, cat *catalog.Catalog) results.GPUInfo {
	p := &fieldParser{}
	info := results.GPUInfo{
		Index:         index,
		Name:          strings.TrimSpace(g.ProductName),
		UUID:          strings.TrimSpace(g.UUID),
		Serial:        na(g.Serial),
		PCIBusID:      na(g.PCI.BusID),
		VBIOS:         na(g.VBIOS),
		Architecture:  na(g.Architecture),
		DriverVersion: na(driver),
		CUDAVersion:   na(cuda),
		NUMANode:      -1,
	}
	info.PCIBusID = cmp.Or(info.PCIBusID, na(g.ID))
	if n := p.int("numa_node", g.NUMANode, ""); n != nil {
		info.NUMANode = *n
	} else {
		p.missing("numa_node: not in this nvidia-smi XML (read sysfs on the host)")
	}
	// nvidia-smi -q -x does not print the compute capability; the catalog knows it per model.
	if c, ok := cat.LookupGPU(info.Name); ok {
		info.ComputeCapability = c.ComputeCap
		p.missing("compute_capability: not in nvidia-smi XML, taken from the catalog")
	} else {
		p.missing("compute_capability: not in nvidia-smi XML")
	}
	if v := p.mib("memory_total", g.FBTotal); v != nil {
		info.MemoryTotalMiB = *v
	}
	info.MemoryUsedMiB = p.mib("memory_used", g.FBUsed)
	info.PCIe = results.PCIeLink{
		GenCurrent: deref(p.int("pcie_gen_current", g.PCI.GenCur, "")), GenMax: deref(p.int("pcie_gen_max", g.PCI.GenMax, "")),
		WidthCurrent: deref(p.int("pcie_width_current", g.PCI.WCur, "x")), WidthMax: deref(p.int("pcie_width_max", g.PCI.WMax, "x")),
	}
	info.PowerLimitW = p.float("power_limit", first(g.PowerLimit, g.OldPowerLimit), "W")
	info.PowerDrawW = p.float("power_draw", first(g.PowerDraw, g.PowerAvg, g.OldPowerDraw), "W")
	info.MaxSMClockMHz = p.int("max_sm_clock", g.MaxSMClock, "MHz")
	info.SMClockMHz = p.int("sm_clock", g.SMClock, "MHz")
	info.TemperatureC = p.int("temperature", g.Temp, "C")
	info.Persistence = p.bool("persistence_mode", g.Persistence)
	info.ECCEnabled = p.bool("ecc_mode", g.ECCMode)
	info.ECC = results.ECC{
		VolatileUncorrected:  p.sum("ecc_volatile_uncorrected", g.ECC.Volatile.DRAMUnc, g.ECC.Volatile.SRAMUncParity, g.ECC.Volatile.SRAMUncSECDED, g.ECC.Volatile.SRAMUnc, g.ECC.Volatile.DoubleBit),
		AggregateUncorrected: p.sum("ecc_aggregate_uncorrected", g.ECC.Aggregate.DRAMUnc, g.ECC.Aggregate.SRAMUncParity, g.ECC.Aggregate.SRAMUncSECDED, g.ECC.Aggregate.SRAMUnc, g.ECC.Aggregate.DoubleBit),
		VolatileCorrected:    p.sum("ecc_volatile_corrected", g.ECC.Volatile.DRAMCorr, g.ECC.Volatile.SRAMCorr, g.ECC.Volatile.SingleBit),
		AggregateCorrected:   p.sum("ecc_aggregate_corrected", g.ECC.Aggregate.DRAMCorr, g.ECC.Aggregate.SRAMCorr, g.ECC.Aggregate.SingleBit),
	}
	info.RetiredPagesPending = p.bool("retired_pages_pending", g.RetiredPending)
	if r := g.Remapped; r != nil && na(r.Pending) != "" {
		pend, fail := p.bool("remapped_rows_pending", r.Pending), p.bool("remapped_rows_failure", r.Failure)
		info.RemappedRows = &results.RemappedRows{
			Correctable: deref(p.int("remapped_rows_correctable", r.Corr, "")), Uncorrectable: deref(p.int("remapped_rows_uncorrectable", r.Unc, "")),
			Pending: pend != nil && *pend, Failure: fail != nil && *fail,
		}
	} else {
		p.missing("remapped_rows: not reported (GPU without row remapping, or N/A)")
	}
	if info.RecoveryAction = NormalizeRecoveryAction(g.RecoveryAction); info.RecoveryAction == "" {
		p.missing("gpu_recovery_action: not reported")
	}
	info.Fabric = fabricFromXML(g.Fabric.State, g.Fabric.Status, g.Fabric.Health)
	items := g.Reasons.Items
	if len(items) == 0 {
		items = g.ThrottleReasons.Items
	}
	info.ClockEvents = ClockEvents(p.reasons(items))
	info.Unsupported = p.notes
	return info
}

// xmlReasonBits maps nvidia-smi's element suffixes (both the clocks_event and clocks_throttle spellings).
var xmlReasonBits = map[string]uint64{
	"gpu_idle": ReasonGPUIdle, "applications_clocks_setting": ReasonApplicationsClocksSetting,
	"sw_power_cap": ReasonSWPowerCap, "hw_slowdown": ReasonHWSlowdown, "sync_boost": ReasonSyncBoost,
	"sw_thermal_slowdown": ReasonSWThermalSlowdown, "hw_thermal_slowdown": ReasonHWThermalSlowdown,
	"hw_power_brake_slowdown": ReasonHWPowerBrakeSlowdown, "display_clocks_setting": ReasonDisplayClockSetting,
	"display_clock_setting": ReasonDisplayClockSetting,
}

// fieldParser reads nvidia-smi's "123.4 W" / "16x" / "N/A" values and keeps notes of what it could not.
type fieldParser struct{ notes []string }

func (p *fieldParser) missing(note string) { p.notes = append(p.notes, note) }

// na trims and maps nvidia-smi's placeholders for "no value" to "".
func na(s string) string {
	s = strings.TrimSpace(s)
	switch strings.ToLower(s) {
	case "n/a", "[n/a]", "not supported", "[not supported]", "unknown error", "[unknown error]", "none":
		return ""
	}
	return s
}

func first(vals ...string) string {
	for _, v := range vals {
		if na(v) != "" {
			return v
		}
	}
	return ""
}

func deref(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

func (p *fieldParser) int(field, raw, unit string) *int {
	return parseNumber(p, field, raw, unit, "an integer", strconv.Atoi)
}

// mib reads a memory figure in MiB.
func (p *fieldParser) mib(field, raw string) *int64 {
	if v := p.int(field, raw, "MiB"); v != nil {
		return new(int64(*v))
	}
	return nil
}

func (p *fieldParser) float(field, raw, unit string) *float64 {
	return parseNumber(p, field, raw, unit, "a number", func(s string) (float64, error) { return strconv.ParseFloat(s, 64) })
}

// parseNumber reads raw less its unit; N/A (or unreadable, said as what) is nil with a note.
func parseNumber[T any](p *fieldParser, field, raw, unit, what string, parse func(string) (T, error)) *T {
	s := na(raw)
	if s == "" {
		if field != "numa_node" {
			p.missing(field + ": not reported")
		}
		return nil
	}
	if unit != "" {
		s = strings.TrimSpace(strings.TrimSuffix(s, unit))
	}
	v, err := parse(s)
	if err != nil {
		hint := ""
		if unit != "" {
			hint = " in " + unit
		}
		p.missing(fmt.Sprintf("%s: cannot read %q as %s%s", field, strings.TrimSpace(raw), what, hint))
		return nil
	}
	return &v
}

func (p *fieldParser) bool(field, raw string) *bool {
	switch strings.ToLower(na(raw)) {
	case "":
		p.missing(field + ": not reported")
		return nil
	case "enabled", "yes", "active", "true":
		return new(true)
	case "disabled", "no", "not active", "false":
		return new(false)
	}
	p.missing(fmt.Sprintf("%s: cannot read %q (want Enabled/Disabled or Yes/No)", field, strings.TrimSpace(raw)))
	return nil
}

// sum adds the counters present; nil when none is reported.
func (p *fieldParser) sum(field string, raws ...string) *int64 {
	var total int64
	seen := false
	for _, raw := range raws {
		s := na(raw)
		if s == "" {
			continue
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			p.missing(fmt.Sprintf("%s: cannot read %q as a count", field, s))
			continue
		}
		total += n
		seen = true
	}
	if !seen {
		p.missing(field + ": not reported")
		return nil
	}
	return &total
}

func (p *fieldParser) reasons(items []smiValue) uint64 {
	var mask uint64
	for _, it := range items {
		name := strings.TrimPrefix(strings.TrimPrefix(it.XMLName.Local, "clocks_event_reason_"), "clocks_throttle_reason_")
		if strings.EqualFold(strings.TrimSpace(it.Value), "Active") {
			mask |= xmlReasonBits[name] // a reason newer than this table has no bit we can name: 0
		}
	}
	if len(items) == 0 {
		p.missing("clock_events: not reported")
	}
	return mask
}
