Section: non-free/kernel
Priority: optional
Standards-Version: 3.9.2
Package: nvidia-kernel-open-dkms
Version: 580.159.04-1
Maintainer: gpuvet tests <tests@gpuvet.invalid>
Postinst: postinst
Description: stand-in for NVIDIA's open kernel module source (DKMS)
 Builds nothing.
