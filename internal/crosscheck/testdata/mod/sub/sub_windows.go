// Package sub is fine on Linux and breaks only on Windows.
package sub

import "os"

func Windows() {}
