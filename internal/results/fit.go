package results

import "reflect"

// FitSlices gives every slice under ptr (a pointer to what was decoded) a backing array of exactly
// its length. The JSON decoder grows a slice by doubling: a node's results read back from its Jobs
// held 37 % spare slice capacity, 23 % of their heap, and a fleet controller holds a thousand of
// them until its host files are written (docs/k8s-scale.md). Values are unchanged. Parse does it.
func FitSlices(ptr any) {
	if v := reflect.ValueOf(ptr); v.Kind() == reflect.Pointer {
		fitSlices(v)
	}
}

func fitSlices(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			fitSlices(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if f := v.Field(i); f.CanSet() {
				fitSlices(f)
			}
		}
	case reflect.Array:
		for i := range v.Len() {
			fitSlices(v.Index(i))
		}
	case reflect.Slice:
		if v.Cap() > v.Len() && v.CanSet() {
			exact := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
			reflect.Copy(exact, v)
			v.Set(exact)
		}
		for i := range v.Len() {
			fitSlices(v.Index(i))
		}
	case reflect.Map:
		fitMap(v)
	}
}

// fitMap fits the slices under a map's values: a value is not addressable, so one held by value
// that may hold a slice is copied out, fitted and put back (a pointer or a map is fitted in place).
func fitMap(m reflect.Value) {
	switch m.Type().Elem().Kind() {
	case reflect.Pointer, reflect.Map:
		for it := m.MapRange(); it.Next(); {
			fitSlices(it.Value())
		}
	case reflect.Struct, reflect.Slice, reflect.Array:
		for it := m.MapRange(); it.Next(); {
			val := reflect.New(m.Type().Elem()).Elem()
			val.Set(it.Value())
			fitSlices(val)
			m.SetMapIndex(it.Key(), val)
		}
	}
}
