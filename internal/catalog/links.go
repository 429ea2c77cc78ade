package catalog

// nvlinkCount is the number of NVLinks each GPU model has (NVIDIA's datasheets: A100 12 × NVLink 3,
// H100/H200 SXM 18 × NVLink 4, B200/GB200 18 × NVLink 5). Models without NVLink are absent.
var nvlinkCount = map[string]int{"A100": 12, "H100": 18, "H200": 18, "B200": 18, "GB200": 18}

// NVLinks is how many NVLinks the model ships with; 0: none (a PCIe card).
func (g GPU) NVLinks() int {
	if g.NVLinkGBps <= 0 {
		return 0
	}
	return nvlinkCount[g.Key]
}

// NVLinkLinkGBps is one link's one-direction datasheet bandwidth (NVLinkGBps ÷ links); 0 without NVLink.
func (g GPU) NVLinkLinkGBps() float64 {
	if n := g.NVLinks(); n > 0 {
		return g.NVLinkGBps / float64(n)
	}
	return 0
}
