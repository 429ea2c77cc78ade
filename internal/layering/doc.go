// Package layering holds no code: its test reads the import graph of the whole module and fails when
// a change breaks one of gpuvet's layering rules (docs/architecture.md, "Layers").
package layering
