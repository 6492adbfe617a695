//! io-harness from Rust: a scripted agent writes hello.txt in a fresh
//! workspace, the verification gate checks it, and the run's events are
//! printed as they arrive. The C ABI is declared by hand below (see
//! include/io_harness.h and docs/abi.md); no crate is needed.
//!
//!     make lib && cargo run --offline --manifest-path examples/rust/Cargo.toml

use std::ffi::{c_char, c_void, CStr, CString};
use std::time::{Duration, Instant};

type EventCallback = Option<extern "C" fn(user: *mut c_void, event_json: *const c_char)>;

#[link(name = "io_harness")]
extern "C" {
    fn io_harness_abi_version() -> u32;
    fn io_harness_call(request_json: *const c_char) -> *mut c_char;
    fn io_harness_free(s: *mut c_char);
    fn io_harness_poll(harness: u64, timeout_ms: i32, max_events: i32) -> *mut c_char;
    #[allow(dead_code)]
    fn io_harness_set_event_callback(harness: u64, cb: EventCallback, user: *mut c_void) -> i32;
    #[allow(dead_code)]
    fn io_harness_cancel(handle: u64) -> i32;
    fn io_harness_close(harness: u64, timeout_ms: i32) -> i32;
}

const ABI_MAJOR: u32 = 1;

/// Takes ownership of a string the library returned and frees it.
fn take(p: *mut c_char) -> Option<String> {
    if p.is_null() {
        return None;
    }
    let s = unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
    unsafe { io_harness_free(p) };
    Some(s)
}

/// Sends one JSON request and returns the envelope, or the error envelope
/// as Err.
fn call(req: &str) -> Result<String, String> {
    let c = CString::new(req).map_err(|e| e.to_string())?;
    let out = take(unsafe { io_harness_call(c.as_ptr()) }).ok_or("io_harness_call returned NULL")?;
    if out.starts_with("{\"ok\":true") {
        Ok(out)
    } else {
        Err(out)
    }
}

/// The first integer value of "key" in a JSON text (enough for this
/// example's flat fields; use serde_json in real code).
fn num(json: &str, key: &str) -> Option<u64> {
    let pat = format!("\"{key}\":");
    let rest = &json[json.find(&pat)? + pat.len()..];
    rest.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
}

/// The first string value of "key".
fn text<'a>(json: &'a str, key: &str) -> Option<&'a str> {
    let pat = format!("\"{key}\":\"");
    let rest = &json[json.find(&pat)? + pat.len()..];
    rest.split('"').next()
}

/// Splits a poll batch (a JSON array of objects) into its events.
fn events(batch: &str) -> Vec<&str> {
    let (mut out, mut depth, mut in_str, mut esc, mut start) = (Vec::new(), 0, false, false, 0);
    for (i, c) in batch.char_indices() {
        if in_str {
            match (esc, c) {
                (true, _) => esc = false,
                (false, '\\') => esc = true,
                (false, '"') => in_str = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_str = true,
            '{' => {
                if depth == 0 {
                    start = i;
                }
                depth += 1
            }
            '}' => {
                depth -= 1;
                if depth == 0 {
                    out.push(&batch[start..=i]);
                }
            }
            _ => {}
        }
    }
    out
}

fn run() -> Result<(), String> {
    let v = unsafe { io_harness_abi_version() };
    if v >> 16 != ABI_MAJOR {
        return Err(format!("libio_harness ABI {}.{}, this program needs {ABI_MAJOR}.x", v >> 16, v & 0xffff));
    }
    let ws = std::env::temp_dir().join(format!("io-harness-rust-{}", std::process::id()));
    std::fs::create_dir_all(&ws).map_err(|e| e.to_string())?;
    let ws_json = format!("{:?}", ws.display().to_string()); // a JSON-safe quoted path for plain paths

    let opened = call(r#"{"method":"harness.open","params":{"store":":memory:"}}"#)?;
    let h = num(&opened, "harness").ok_or("no harness handle")?;
    let spec = format!(
        r#"{{"task":{{"goal":"Create hello.txt saying hello, world.","root":{ws_json},
            "verification":[{{"kind":"workspace_file_contains","file":"hello.txt","text":"hello, world"}}]}},
          "provider":{{"name":"scripted","script":{{"turns":[{{"text":"Writing the greeting.",
            "tool_calls":[{{"name":"write_file","arguments":{{"path":"hello.txt","content":"hello, world\n"}}}}]}}]}}}}}}"#
    );
    let started = call(&format!(r#"{{"method":"run.start","params":{{"harness":{h},"spec":{spec}}}}}"#))?;
    println!("run {} in {}", text(&started, "run_id").unwrap_or("?"), ws.display());

    let deadline = Instant::now() + Duration::from_secs(30);
    let mut outcome = None;
    while outcome.is_none() && Instant::now() < deadline {
        let Some(batch) = take(unsafe { io_harness_poll(h, 100, 64) }) else { continue };
        for ev in events(&batch) {
            let kind = text(ev, "kind").unwrap_or("?");
            if kind != "model_delta" {
                println!("  {kind}");
            }
            if kind == "done" {
                outcome = Some(ev.contains(r#""outcome":{"kind":"success""#));
                if outcome == Some(false) {
                    eprintln!("run ended: {ev}");
                }
            }
        }
    }
    unsafe { io_harness_close(h, 5000) };
    let stats = call(r#"{"method":"debug.stats"}"#)?;
    let _ = std::fs::remove_dir_all(&ws);
    match outcome {
        Some(true) => {
            println!("outcome: success (strings live: {})", num(&stats, "strings_live").unwrap_or(u64::MAX));
            Ok(())
        }
        Some(false) => Err("the run did not succeed".into()),
        None => Err("no outcome within 30s".into()),
    }
}

fn main() {
    if let Err(e) = run() {
        eprintln!("io-harness example: {e}");
        std::process::exit(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_events() {
        let b = r#"[{"run":1,"kind":"a","x":{"kind":"n"}},{"kind":"done","s":"}{"}]"#;
        let evs = events(b);
        assert_eq!(evs.len(), 2);
        assert_eq!(text(evs[0], "kind"), Some("a"));
        assert_eq!(text(evs[1], "kind"), Some("done"));
    }

    #[test]
    fn runs_the_scripted_task() {
        run().unwrap();
    }
}
