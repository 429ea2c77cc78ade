package results

// VM is one VM gpuvet created to vet GPUs through passthrough (backend opennebula).
type VM struct {
	ID   int    `json:"id"`
	Name string `json:"name"`
	// GPUs are the host's GPU indexes passed through (results use these indexes, not the VM's own).
	GPUs []int `json:"gpus"`
	// PCI are their short addresses on the host ("41:00.0").
	PCI []string `json:"pci"`
	// NUMANode is the TOPOLOGY NODE_AFFINITY set; nil when unknown (PinPolicy then says what was used).
	NUMANode  *int   `json:"numa_node,omitempty"`
	PinPolicy string `json:"pin_policy,omitempty"`
	// ProvisionS is create → RUNNING with SSH answering, in seconds.
	ProvisionS float64 `json:"provision_s"`
	// Terminated is set when cleanup saw it gone (DONE or deleted).
	Terminated bool `json:"terminated"`
}
