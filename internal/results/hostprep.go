package results

// HostPrep is what host preparation (host_prep.*) did on one host: what it found and used, what it
// installed before the run, what it removed after, and what it could not remove (said loudly).
type HostPrep struct {
	// Used are the tools the host had, used and never touched ("nvidia-smi", "running nv-hostengine").
	Used []string `json:"used,omitempty"`
	// Installed are the packages this run installed (package=version), dependencies included.
	Installed []string `json:"installed,omitempty"`
	// Started are the processes this run started (nv-hostengine), stopped after.
	Started []string `json:"started,omitempty"`
	// Removed are the packages purged (and processes stopped) after the run.
	Removed []string `json:"removed,omitempty"`
	// Autoremove says whether `apt-get autoremove` ran after the purge, and why (not).
	Autoremove string `json:"autoremove,omitempty"`
	// Left is what cleanup could not remove: `gpuvet clean` finishes it from the run manifest.
	Left []string `json:"left,omitempty"`
	// Error is why the host could not be prepared (nothing was changed then).
	Error string `json:"error,omitempty"`
	// VFIO are the steps of a virtualization node's vfio release and restore (host_prep.vfio_release):
	// "released 0000:41:00.0 from vfio-pci (override lifted)", "bound … to nvidia", "restored …".
	VFIO []string `json:"vfio,omitempty"`
	// RestoreError is an incomplete vfio restore: the node cannot pass those GPUs to VMs until
	// `gpuvet clean` (or a person) puts them back on vfio-pci. It fails the host.
	RestoreError string `json:"restore_error,omitempty"`
}
