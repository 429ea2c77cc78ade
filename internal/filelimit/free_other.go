//go:build !unix

package filelimit

// FreeBytes cannot ask the file system here: the writes will tell.
func FreeBytes(dir string) (int64, bool) { return 0, false }
