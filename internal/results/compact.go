package results

import (
	"reflect"
	"sync"
)

// Compact gives every slice under ptr (a pointer to what was decoded) a backing array of exactly
// its length, and every string field the one copy of its text the process holds; values are
// unchanged (Parse does it). A fleet controller holds a thousand nodes' results (docs/k8s-scale.md):
// decoded slices carried 37 % spare capacity (23 % of the heap), and 94 % of a node's string bytes
// repeat another node's.
func Compact(ptr any) {
	if v := reflect.ValueOf(ptr); v.Kind() == reflect.Pointer {
		compact(v)
	}
}

// shared holds one copy of each string Compact has seen, up to sharedMax of them and sharedLen bytes
// each (at most 32 MiB, a few MiB at 1,000 nodes): the texts that repeat from node to node come
// first and are few, and past the bounds a string keeps its own bytes.
var shared = struct {
	sync.Mutex
	m map[string]string
}{m: map[string]string{}}

const sharedMax, sharedLen = 1 << 15, 1 << 10

func share(s string) string {
	if len(s) > sharedLen {
		return s
	}
	shared.Lock()
	defer shared.Unlock()
	if c, ok := shared.m[s]; ok {
		return c
	}
	if len(shared.m) < sharedMax {
		shared.m[s] = s
	}
	return s
}

// compact fits v's slices and shares its strings, all the way down.
func compact(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			compact(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if f := v.Field(i); f.CanSet() {
				compact(f)
			}
		}
	case reflect.Array:
		for i := range v.Len() {
			compact(v.Index(i))
		}
	case reflect.Slice:
		if v.Cap() > v.Len() && v.CanSet() {
			exact := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
			reflect.Copy(exact, v)
			v.Set(exact)
		}
		for i := range v.Len() {
			compact(v.Index(i))
		}
	case reflect.Map:
		compactMap(v)
	case reflect.String:
		if v.Len() > 0 && v.CanSet() {
			v.SetString(share(v.String()))
		}
	}
}

// compactMap compacts what a map's values hold: a value is not addressable, so one held by value
// that may hold a slice or a string field is copied out, compacted and put back (a pointer or a map
// is compacted in place). Keys, and values that are strings themselves, keep their own bytes.
func compactMap(m reflect.Value) {
	switch m.Type().Elem().Kind() {
	case reflect.Pointer, reflect.Map:
		for it := m.MapRange(); it.Next(); {
			compact(it.Value())
		}
	case reflect.Struct, reflect.Slice, reflect.Array:
		for it := m.MapRange(); it.Next(); {
			val := reflect.New(m.Type().Elem()).Elem()
			val.Set(it.Value())
			compact(val)
			m.SetMapIndex(it.Key(), val)
		}
	}
}
