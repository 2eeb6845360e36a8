//! What a load run measured, and how it is printed.

use std::time::Duration;

/// The `p` quantile (0..=1) of sorted durations.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[rank]
}

/// Milliseconds with three decimals.
pub fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

/// The outcome of one measured phase.
#[derive(Debug, Default)]
pub struct LoadReport {
    /// Latency of every answered call.
    pub latencies: Vec<Duration>,
    /// Wall time of the phase.
    pub elapsed: Duration,
    /// Calls answered with an error or tool-error that the workload did not expect.
    pub errors: usize,
    /// The first such answer, for the message.
    pub first_error: Option<String>,
    /// Server CPU seconds spent during the phase (all server processes), when known.
    pub server_cpu_seconds: Option<f64>,
    /// CPU seconds the PostgreSQL server spent during the phase, when on PostgreSQL.
    pub database_cpu_seconds: Option<f64>,
    /// Server resident set at the end, KiB (summed over processes), when known.
    pub server_rss_kib: Option<u64>,
    /// The private part of it (`RssAnon`), KiB, when known.
    pub server_anon_rss_kib: Option<u64>,
    /// Highest server resident set seen (summed over processes), KiB, when known.
    pub server_peak_rss_kib: Option<u64>,
}

impl LoadReport {
    /// Calls per second.
    pub fn rate(&self) -> f64 {
        self.latencies.len() as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// Record one failed call.
    pub fn fail(&mut self, why: String) {
        self.errors += 1;
        if self.first_error.is_none() {
            self.first_error = Some(why);
        }
    }

    /// Fold another client's report of the same phase into this one.
    pub fn merge(&mut self, other: LoadReport) {
        self.latencies.extend(other.latencies);
        self.elapsed = self.elapsed.max(other.elapsed);
        self.errors += other.errors;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
    }

    /// One line: `<label>: N calls/s, p50, p99[, server CPU/call][, RSS]`.
    pub fn line(&mut self, label: &str) -> String {
        self.latencies.sort();
        let calls = self.latencies.len();
        let mut out = format!(
            "{label}: {calls} calls, {:.0} calls/s, p50 {}, p99 {}",
            self.rate(),
            ms(percentile(&self.latencies, 0.5)),
            ms(percentile(&self.latencies, 0.99)),
        );
        if let Some(cpu) = self.server_cpu_seconds {
            out += &format!(
                ", server CPU {:.1} µs/call",
                cpu / calls.max(1) as f64 * 1e6
            );
        }
        if let Some(cpu) = self.database_cpu_seconds {
            out += &format!(
                ", PostgreSQL CPU {:.1} µs/call",
                cpu / calls.max(1) as f64 * 1e6
            );
        }
        if let Some(rss) = self.server_rss_kib {
            out += &format!(", server RSS {}", crate::procs::mib(rss));
        }
        if let Some(peak) = self.server_peak_rss_kib {
            out += &format!(" (peak {})", crate::procs::mib(peak));
        }
        if let Some(anon) = self.server_anon_rss_kib {
            out += &format!(", private {}", crate::procs::mib(anon));
        }
        out += &format!(", {} errors", self.errors);
        out
    }

    /// Fail when any call failed (for unmeasured phases).
    pub fn ensure_ok(&self, label: &str) -> anyhow::Result<()> {
        if let Some(first) = &self.first_error {
            anyhow::bail!("{label}: {} calls failed; first: {first}", self.errors);
        }
        Ok(())
    }

    /// Print [`LoadReport::line`] and fail when any call failed.
    pub fn print_and_check(mut self, label: &str) -> anyhow::Result<LoadReport> {
        println!("{}", self.line(label));
        self.ensure_ok(label)?;
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_pick_ranks() {
        let d: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile(&d, 0.5), Duration::from_millis(51));
        assert_eq!(percentile(&d, 0.99), Duration::from_millis(99));
        assert_eq!(percentile(&d, 0.0), Duration::from_millis(1));
        assert_eq!(percentile(&[], 0.5), Duration::ZERO);
    }
}
