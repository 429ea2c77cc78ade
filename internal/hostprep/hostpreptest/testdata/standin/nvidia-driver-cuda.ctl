Section: non-free/libs
Priority: optional
Standards-Version: 3.9.2
Package: nvidia-driver-cuda
Version: 580.159.04-1
Maintainer: gpuvet tests <tests@gpuvet.invalid>
Files: nvidia-smi /usr/bin/
 nvidia-smi-q-idle.xml /usr/share/nvidia-standin/
 nvidia-smi.txt /usr/share/nvidia-standin/
Postinst: postinst
Description: stand-in for NVIDIA's CUDA driver user space (nvidia-smi)
 Prints a real H200's nvidia-smi output.
