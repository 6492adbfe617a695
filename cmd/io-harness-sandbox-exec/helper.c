//go:build linux && cgo

// The helper's entry point: a constructor, so that it runs before the Go
// runtime starts (glibc passes it main's arguments). Started by package
// sandbox with its one flag, it becomes the spawner and never returns;
// otherwise it returns and main prints the usage.
#include <string.h>

extern void iohs_helper_main(void);

__attribute__((constructor)) static void iohs_helper_entry(int argc, char **argv, char **envp) {
	(void)envp;
	if (argc == 2 && strcmp(argv[1], "--io-harness-spawn") == 0)
		iohs_helper_main();
}
