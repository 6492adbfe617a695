package sub

// Fine is fine everywhere.
func Fine() {}
