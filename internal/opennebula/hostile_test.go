package opennebula

import (
	"strings"
	"testing"
)

// A GPU whose PCI monitoring lacks a readable VMID may be a VM's: it is an error naming the field,
// never a free GPU (a VM would be asked for it, and a bare-metal release would not see the VM).
func TestHostPoolGPUWithoutVMIDIsAnError(t *testing.T) {
	for _, vmid := range []string{"", "<VMID></VMID>", "<VMID>n/a</VMID>"} {
		doc := `<HOST_POOL><HOST><ID>1</ID><NAME>n1</NAME><STATE>2</STATE><HOST_SHARE><PCI_DEVICES><PCI><SHORT_ADDRESS>41:00.0</SHORT_ADDRESS><VENDOR>10de</VENDOR><CLASS>0302</CLASS>` + vmid + `</PCI></PCI_DEVICES></HOST_SHARE></HOST></HOST_POOL>`
		pool, err := ParseHostPool([]byte(doc))
		if err == nil || !strings.Contains(err.Error(), "VMID") {
			t.Errorf("VMID %q: %+v, %v", vmid, pool, err)
		}
	}
}

// A credentials variable that is neither user:password nor a file: the error never prints its value.
func TestCredentialsErrorHidesTheValue(t *testing.T) {
	t.Setenv("GPUVET_TEST_AUTH", "s3cr3t-pass")
	_, err := Credentials("GPUVET_TEST_AUTH")
	if err == nil || strings.Contains(err.Error(), "s3cr3t") {
		t.Fatalf("error: %v", err)
	}
}
