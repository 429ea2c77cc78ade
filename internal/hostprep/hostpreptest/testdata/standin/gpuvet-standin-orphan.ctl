Section: misc
Priority: optional
Standards-Version: 3.9.2
Package: gpuvet-standin-orphan
Version: 1.0
Maintainer: gpuvet tests <tests@gpuvet.invalid>
Description: an autoremovable package a host had before gpuvet came
 Installed and marked automatic by the autoremove test: gpuvet must leave it.
