// Package nilness tells a nil interface value from one that only looks
// set: the configs and constructors of idemstore refuse both with a typed
// error, because an interface holding a nil pointer (a value whose
// constructor error was ignored, a nil func of an adapter type) passes a
// plain == nil check and panics on its first method call, far from the
// mistake.
package nilness

import "reflect"

// IsNil reports whether v is nil or an interface holding a nil pointer,
// map, slice, func, channel or interface: calling a method on it would
// panic (or, for a func type, calling it would).
func IsNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface:
		return rv.IsNil()
	}
	return false
}
