//! The process's own CPU time, resident memory and open files for `/metrics`, read from
//! `/proc/self` at each scrape (Linux; elsewhere these series are left out). Written here
//! because `prometheus-client` has no process collector (the other Rust client's is tied
//! to its own registry).

use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::{Registry, Unit};

/// What `/proc/self` says now.
struct ProcessStats {
    cpu_seconds: f64,
    resident_bytes: i64,
    open_files: i64,
}

/// Read `/proc/self/stat` (fields 14 and 15: user and system time in clock ticks; 24: the
/// resident pages) and count `/proc/self/fd`.
fn read() -> Option<ProcessStats> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: count fields
    // after its closing one, which is field 3's start.
    let after_name = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
    let ticks = rustix::param::clock_ticks_per_second().max(1);
    let cpu_seconds = (field(14)? + field(15)?) as f64 / ticks as f64;
    let resident_pages = field(24)?;
    let resident_bytes = resident_pages.saturating_mul(rustix::param::page_size() as u64);
    let open_files = std::fs::read_dir("/proc/self/fd").ok()?.count();
    Some(ProcessStats {
        cpu_seconds,
        resident_bytes: i64::try_from(resident_bytes).unwrap_or(i64::MAX),
        open_files: i64::try_from(open_files).unwrap_or(i64::MAX),
    })
}

/// Add `clawboo_process_cpu_seconds_total`, `clawboo_process_resident_memory_bytes` and
/// `clawboo_process_open_fds` as they are now.
pub(crate) fn register(registry: &mut Registry) {
    let Some(stats) = read() else {
        return;
    };
    registry.register_with_unit(
        "process_cpu",
        "CPU time this process used, user and system",
        Unit::Seconds,
        ConstCounter::new(stats.cpu_seconds),
    );
    registry.register_with_unit(
        "process_resident_memory",
        "Resident memory of this process",
        Unit::Bytes,
        ConstGauge::new(stats.resident_bytes),
    );
    registry.register(
        "process_open_fds",
        "Files (and sockets) this process holds open",
        ConstGauge::new(stats.open_files),
    );
}
