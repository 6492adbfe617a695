//go:build !unix

package tool

import "os"

// searchOpenFlags are the flags grep opens files with.
const searchOpenFlags = os.O_RDONLY
