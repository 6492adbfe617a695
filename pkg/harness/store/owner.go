package store

import (
	"os"
	"time"
)

// Self returns this process as an [Owner]: the host's name, the pid and,
// where the system says, the time the process started.
func Self() Owner {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	pid := os.Getpid()
	started, _ := processStart(pid)
	return Owner{Host: host, PID: pid, Started: started}
}

// Lapsed reports whether the lease can be taken over by a driver on
// local's host at now: it expired, or its owner ran on this host and its
// process is gone (or is a later process that reuses its pid). Nothing
// about a process on another host is known but the expiry, and no clock
// is trusted beyond it.
func (l *Lease) Lapsed(now time.Time, local Owner) bool {
	return !now.Before(l.Expires) || l.Owner.Gone(local)
}

// Gone reports whether o ran on local's host and its process is gone (or
// is a later process that reuses its pid). Nothing is known of a process
// on another host: it is never gone.
func (o Owner) Gone(local Owner) bool {
	if o.Host != local.Host {
		return false
	}
	alive, known := processAlive(o.PID, o.Started)
	return known && !alive
}
