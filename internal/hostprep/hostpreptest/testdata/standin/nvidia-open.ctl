Section: non-free/kernel
Priority: optional
Standards-Version: 3.9.2
Package: nvidia-open
Version: 580.159.04-1
Maintainer: gpuvet tests <tests@gpuvet.invalid>
Depends: nvidia-driver-cuda (= 580.159.04-1), nvidia-kernel-open-dkms (= 580.159.04-1)
Postinst: postinst
Description: stand-in for NVIDIA's open GPU kernel driver meta package
 gpuvet's host-preparation tests install and purge it.
