//! Every thread's stack, for a benchmark that stopped making progress (the
//! GPU machine has no debugger): each thread of the process is sent
//! `SIGUSR1` in turn, captures its own backtrace in the handler, and the
//! caller prints them, threads with the same stack together. Linux only;
//! the executables keep their symbol tables (the bundle strips only debug
//! information), so frames name their functions.

use std::backtrace::Backtrace;
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The backtrace the signalled thread left, taken by the dumper.
static CAPTURED: Mutex<Option<Backtrace>> = Mutex::new(None);
static READY: AtomicBool = AtomicBool::new(false);

extern "C" fn capture(_signal: libc::c_int) {
    // A thread stopped in a wait holds no lock of the allocator or of this
    // slot (only the dumper takes it, and not while it signals).
    let trace = Backtrace::force_capture();
    if let Ok(mut slot) = CAPTURED.try_lock() {
        *slot = Some(trace);
    }
    READY.store(true, Ordering::SeqCst);
}

fn install() -> std::io::Result<()> {
    // SAFETY: a zeroed sigaction with a handler and an empty mask is valid;
    // SA_RESTART restarts interrupted system calls (futex waits loop anyway).
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = capture as *const () as libc::sighandler_t;
        action.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        if libc::sigaction(libc::SIGUSR1, &action, std::ptr::null_mut()) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Every other thread's stack, grouped: (thread names, stack text).
pub fn all_threads() -> std::io::Result<Vec<(Vec<String>, String)>> {
    install()?;
    // SAFETY: plain system calls without memory arguments.
    let (pid, me) = unsafe {
        (
            libc::getpid(),
            libc::syscall(libc::SYS_gettid) as libc::pid_t,
        )
    };
    let mut by_stack: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for entry in std::fs::read_dir("/proc/self/task")? {
        let entry = entry?;
        let Ok(tid) = entry.file_name().to_string_lossy().parse::<libc::pid_t>() else {
            continue;
        };
        if tid == me {
            continue;
        }
        let comm = std::fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
        let name = format!("{tid} {}", comm.trim());
        READY.store(false, Ordering::SeqCst);
        *CAPTURED.lock().unwrap_or_else(|e| e.into_inner()) = None;
        // SAFETY: tgkill to a thread of this process, whose handler is set.
        let sent = unsafe { libc::syscall(libc::SYS_tgkill, pid, tid, libc::SIGUSR1) };
        if sent != 0 {
            continue; // it ended meanwhile
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while !READY.load(Ordering::SeqCst) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        let stack = match CAPTURED.lock().unwrap_or_else(|e| e.into_inner()).take() {
            Some(trace) => trace.to_string(),
            None => "(no backtrace within 5 s)".to_owned(),
        };
        by_stack.entry(stack).or_default().push(name);
    }
    Ok(by_stack.into_iter().map(|(s, t)| (t, s)).collect())
}

/// [`all_threads`] to stderr.
pub fn dump() {
    match all_threads() {
        Ok(groups) => {
            for (threads, stack) in groups {
                eprintln!(
                    "watchdog: {} thread(s) [{}]:\n{stack}",
                    threads.len(),
                    threads.join(", ")
                );
            }
        }
        Err(e) => eprintln!("watchdog: thread stacks not taken: {e}"),
    }
}
