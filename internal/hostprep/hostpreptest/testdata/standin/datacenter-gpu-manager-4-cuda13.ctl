Section: non-free/utils
Priority: optional
Standards-Version: 3.9.2
Package: datacenter-gpu-manager-4-cuda13
Version: 1:4.4.1-1
Maintainer: gpuvet tests <tests@gpuvet.invalid>
Depends: datacenter-gpu-manager-4-core (= 1:4.4.1-1)
Postinst: postinst
Description: stand-in for NVIDIA DCGM 4 for CUDA 13
 gpuvet's host-preparation tests install and purge it.
