package mod

func onlyLinux() int { return 1 }
