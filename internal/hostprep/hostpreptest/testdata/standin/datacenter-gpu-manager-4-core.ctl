Section: non-free/utils
Priority: optional
Standards-Version: 3.9.2
Package: datacenter-gpu-manager-4-core
Version: 1:4.4.1-1
Maintainer: gpuvet tests <tests@gpuvet.invalid>
Files: dcgmi /usr/bin/
 nv-hostengine /usr/bin/
 dcgm4-level2-pass.json /usr/share/dcgm-standin/
Postinst: postinst
Description: stand-in for NVIDIA DCGM 4's core (dcgmi, nv-hostengine)
 Prints a DCGM 4 level-2 diagnostic.
