// Package layering holds no code: its test reads the import graph of the whole module and checks it
// against an allow-list (every package names the module packages it may import; a new package or a
// new import is added there first) and, over everything each package may reach and does reach
// through others, gpuvet's layering rules (docs/architecture.md, "Layers").
package layering
