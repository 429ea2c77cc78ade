package gpu

import (
	"github.com/gpuvet/gpuvet/internal/catalog"
	"github.com/gpuvet/gpuvet/internal/results"
)

// The tests feed captures as bytes: these are FromNvidiaSMIXML's parse without its file read.

// ParseNvidiaSMIXML is the inventory FromNvidiaSMIXML reads from `nvidia-smi -q -x`; the compute
// capability, which the XML lacks, comes from cat (nil: the built-in catalog).
func ParseNvidiaSMIXML(data []byte, cat *catalog.Catalog) ([]results.GPUInfo, error) {
	log, err := decodeSMI(data)
	if err != nil {
		return nil, err
	}
	return log.source("", cat).gpus, nil
}

// ParseNvidiaSMIOccupancy is what the capture shows on each GPU besides the inventory, as the
// source's Occupancy gives it: the processes, memory in use, utilisation and power.
func ParseNvidiaSMIOccupancy(data []byte) ([]results.Occupancy, error) {
	log, err := decodeSMI(data)
	if err != nil {
		return nil, err
	}
	return log.source("", nil).occ, nil
}
