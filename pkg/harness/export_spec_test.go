package harness

import "reflect"

// FirstProblem is the walk ParseSpec names a decoding problem's field
// with, for a test that checks it against encoding/json.
func FirstProblem(data []byte) (field, problem string) {
	return firstProblem(data, reflect.TypeFor[Spec]())
}
