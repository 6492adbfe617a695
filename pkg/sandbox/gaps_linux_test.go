package sandbox

import (
	"context"
	"strings"
	"testing"
)

// The Gaps of a backend say that a harness command on a workspace runs on
// a copy exactly when the backend has no overlay: the sentence is not
// added to a backend that holds a command's changes apart.
func TestGapsSayCopy(t *testing.T) {
	started := 0
	for _, name := range []string{BackendLinuxNS, BackendLinuxLandlock, BackendBwrap, BackendFloor, BackendHost} {
		sb, err := New(context.Background(), &Options{Backend: name})
		if err != nil {
			t.Logf("%s does not start here: %v", name, err)
			continue
		}
		started++
		e := sb.Enforcement()
		if says := strings.Contains(e.Gaps, CopyGap); says == e.Overlay {
			t.Errorf("%s: overlay %v, and its Gaps say a copy: %v\n%s", name, e.Overlay, says, e.Gaps)
		}
	}
	if started == 0 {
		t.Fatal("no backend starts here")
	}
}
