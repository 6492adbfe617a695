// Links libio_harness from IO_HARNESS_LIB_DIR, or from the repository's
// bin/ (where `make lib` puts it), and records an rpath so the example runs
// without LD_LIBRARY_PATH.
use std::env;
use std::path::PathBuf;

fn main() {
    let dir = match env::var("IO_HARNESS_LIB_DIR") {
        Ok(d) if !d.is_empty() => PathBuf::from(d),
        _ => PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap()).join("../../bin"),
    };
    let dir = dir.canonicalize().unwrap_or(dir);
    println!("cargo:rerun-if-env-changed=IO_HARNESS_LIB_DIR");
    println!("cargo:rustc-link-search=native={}", dir.display());
    println!("cargo:rustc-link-lib=dylib=io_harness");
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.display());
}
